#pragma once
// Runs a function eagerly and through a compiled callable on identical inputs and asserts the
// observable behaviour matches: outputs (values, sizes, requires_grad, is_leaf), output aliasing
// (with each other and with inputs), inputs after the call (values, sizes, strides), and
// gradients of a weighted sum of the differentiable outputs with respect to every input that
// requires grad.
#include <aotpipe/stages/metadata/collect_metadata.h>

#include <functional>
#include <string>

namespace aotpipe::testing {

void expect_matches_eager(const Function& eager, const std::function<TensorList(const TensorList&)>& compiled,
                          const std::function<TensorList()>& make_inputs, const std::string& label, double rtol = 1e-4,
                          double atol = 1e-5);

}  // namespace aotpipe::testing
