#pragma once
// Runs a function eagerly and through a compiled callable on identical inputs and lists every
// observable difference: outputs (values, sizes, dtype, requires_grad, is_leaf), output aliasing
// (with each other and with the inputs), inputs after the call (values, sizes, strides), and the
// gradients of a weighted sum of the differentiable outputs with respect to the leaves the
// inputs were computed from. Used by the tests (tests/runtime/eager_check.h) and by
// `aotpipe compile --check`.
#include <aotpipe/stages/compile_state.h>

#include <functional>
#include <string>
#include <vector>

namespace aotpipe {

struct EquivalenceTolerance {
  double rtol = 1e-4;
  double atol = 1e-5;
};

// Each entry names what differs ("output 1 values", "gradient 0 definedness", ...). Empty when
// the two behave the same. Values are compared with allclose(rtol, atol); gradients with an
// absolute tolerance of atol + rtol * (largest eager gradient entry), since a compiled graph may
// sum a reduction in another order. `make_inputs` is called twice, with the same RNG seed before each
// call, and must give equal fresh inputs.
std::vector<std::string> compare_with_eager(const Function& eager, const Function& compiled,
                                            const std::function<TensorList()>& make_inputs,
                                            EquivalenceTolerance tolerance = {});

}  // namespace aotpipe
