#include "eager_check.h"

#include <aotpipe/runtime/eager_equivalence.h>

#include <gtest/gtest.h>

namespace aotpipe::testing {

void expect_matches_eager(const Function& eager, const std::function<TensorList(const TensorList&)>& compiled,
                          const std::function<TensorList()>& make_inputs, const std::string& label, double rtol,
                          double atol) {
  for (const std::string& diff : compare_with_eager(eager, compiled, make_inputs, {rtol, atol}))
    ADD_FAILURE() << label << ": " << diff;
}

}  // namespace aotpipe::testing
