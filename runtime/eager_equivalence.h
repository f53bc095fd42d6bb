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
  // Also run `eager` on float64 copies of the inputs and accept a floating value that fails
  // allclose when the compiled result is as close to the float64 one as eager's float32 result
  // is, up to a factor: rmse(compiled, fp64) <= 2 * rmse(eager, fp64) + rtol / 10, the rule of
  // PyTorch's own accuracy checks (torch._dynamo.utils.same). Gradients that are mathematically
  // near zero differ by more than any fixed tolerance between two correct float32 programs.
  // Where the float64 run fails (a program with fixed float32 dtypes), the fixed tolerance alone.
  bool fp64_reference = false;
};

// The float64 rule of EquivalenceTolerance::fp64_reference for one value: `result` is no further
// from `fp64` (the same computation in float64) than `eager` (in float32) is, up to 2x plus
// tol.rtol / 10, by root mean square error. False for different sizes or a non-float result.
bool within_fp64_error(const at::Tensor& eager, const at::Tensor& result, const at::Tensor& fp64,
                       EquivalenceTolerance tol = {});

// Each entry names what differs ("output 1 values", "gradient 0 definedness", ...). Empty when
// the two behave the same. Values are compared with allclose(rtol, atol); gradients with an
// absolute tolerance of atol + rtol * (largest eager gradient entry), since a compiled graph may
// sum a reduction in another order. `make_inputs` is called twice, with the same RNG seed before each
// call, and must give equal fresh inputs.
std::vector<std::string> compare_with_eager(const Function& eager, const Function& compiled,
                                            const std::function<TensorList()>& make_inputs,
                                            EquivalenceTolerance tolerance = {});
// The same, with the float64 reference run by `eager_in_float64` instead of `eager`: for a
// program that closes over float32 tensors (graph_function_in_float64).
std::vector<std::string> compare_with_eager(const Function& eager, const Function& compiled,
                                            const std::function<TensorList()>& make_inputs,
                                            EquivalenceTolerance tolerance, const Function& eager_in_float64);

}  // namespace aotpipe
