#include "test_support.h"

#include <aotpipe/graph/random_tensor.h>

#include <fmt/format.h>

namespace aotpipe::testing {

at::Tensor make_tensor(const TensorMeta& meta, at::Generator& gen) { return random_tensor(meta, gen); }

std::vector<at::Tensor> make_inputs(const Graph& graph, uint64_t seed) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  std::vector<at::Tensor> inputs;
  for (Value* in : graph.inputs()) {
    if (!in->meta()) throw std::runtime_error("make_inputs: input %" + in->name() + " has no TensorMeta");
    inputs.push_back(make_tensor(*in->meta(), gen));
  }
  return inputs;
}

::testing::AssertionResult tensors_close(const at::Tensor& expected, const at::Tensor& actual, double rtol,
                                         double atol) {
  if (expected.defined() != actual.defined()) return ::testing::AssertionFailure() << "one tensor is undefined";
  if (!expected.defined()) return ::testing::AssertionSuccess();
  if (expected.scalar_type() != actual.scalar_type())
    return ::testing::AssertionFailure() << "dtype " << actual.scalar_type() << ", expected " << expected.scalar_type();
  if (expected.sizes() != actual.sizes())
    return ::testing::AssertionFailure() << "sizes " << actual.sizes() << ", expected " << expected.sizes();
  bool close = at::isFloatingType(expected.scalar_type()) || at::isComplexType(expected.scalar_type())
                   ? at::allclose(expected, actual, rtol, atol, /*equal_nan=*/true)
                   : at::equal(expected, actual);
  if (!close) {
    auto diff = (expected.to(at::kDouble) - actual.to(at::kDouble)).abs().max().item<double>();
    return ::testing::AssertionFailure() << "values differ, max abs difference " << diff;
  }
  return ::testing::AssertionSuccess();
}

::testing::AssertionResult tensor_lists_close(const std::vector<at::Tensor>& expected,
                                              const std::vector<at::Tensor>& actual, double rtol, double atol) {
  if (expected.size() != actual.size())
    return ::testing::AssertionFailure() << actual.size() << " tensors, expected " << expected.size();
  for (std::size_t i = 0; i < expected.size(); ++i) {
    auto r = tensors_close(expected[i], actual[i], rtol, atol);
    if (!r) return ::testing::AssertionFailure() << "tensor " << i << ": " << r.message();
  }
  return ::testing::AssertionSuccess();
}

}  // namespace aotpipe::testing
