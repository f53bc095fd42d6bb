#pragma once
// Shared helpers of the graph test suites.
#include <aotpipe/graph/graph.h>
#include <aotpipe/graph/interpreter.h>

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <functional>
#include <vector>

namespace aotpipe::testing {

// aotpipe::random_tensor (graph/random_tensor.h), under the name the graph tests use.
at::Tensor make_tensor(const TensorMeta& meta, at::Generator& gen);
std::vector<at::Tensor> make_inputs(const Graph& graph, uint64_t seed = 0);

// Same dtype, sizes, and values within tolerance (NaNs equal).
::testing::AssertionResult tensors_close(const at::Tensor& expected, const at::Tensor& actual, double rtol = 1e-5,
                                         double atol = 1e-6);
::testing::AssertionResult tensor_lists_close(const std::vector<at::Tensor>& expected,
                                              const std::vector<at::Tensor>& actual, double rtol = 1e-5,
                                              double atol = 1e-6);

}  // namespace aotpipe::testing

namespace aotpipe::testing {
// A random, well-formed graph (seeded, reproducible): pointwise, scalar, reduction, view,
// multi-output, list-taking and list-returning ops with keyword and default arguments,
// TensorMeta filled by shape propagation. Used for round-trip and fuzz tests.
Graph random_graph(uint64_t seed, int num_nodes = 24);
}  // namespace aotpipe::testing

namespace aotpipe::testing {
// Runs `interp` (a graph of one [n, n] input and one output) from 4 threads at once, 20 times each
// on fresh random inputs, and expects every result to be close to `eager` of its input.
void expect_concurrent_runs_match(const Interpreter& interp, const std::function<at::Tensor(const at::Tensor&)>& eager,
                                  int64_t n);

// For a test program run with AOTPIPE_TEST_BACKEND=planned: a global environment that, at the
// end, prints the planned runs' counts and expects at least one run on an arena and no out=
// kernel refusing a call. Register it with ::testing::AddGlobalTestEnvironment.
::testing::Environment* planned_runs_check();
}  // namespace aotpipe::testing
