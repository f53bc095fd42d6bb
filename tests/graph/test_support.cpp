#include "test_support.h"

#include <aotpipe/graph/random_tensor.h>

#include <fmt/format.h>

#include <cstdio>
#include <cstdlib>
#include <string_view>
#include <thread>

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

void expect_concurrent_runs_match(const Interpreter& interp, const std::function<at::Tensor(const at::Tensor&)>& eager,
                                  int64_t n) {
  std::vector<std::thread> threads;
  std::vector<int> ok(4, 0);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 20; ++i) {
        at::Tensor x = at::randn({n, n});
        ok[t] += tensors_close(eager(x), interp.run({x})[0], 1e-4, 1e-5) ? 1 : 0;
      }
    });
  }
  for (auto& th : threads) th.join();
  for (int t = 0; t < 4; ++t) EXPECT_EQ(ok[t], 20) << "thread " << t;
}

namespace {
class PlannedRunsCheck : public ::testing::Environment {
  void TearDown() override {
    const char* backend = std::getenv("AOTPIPE_TEST_BACKEND");
    if (!backend || std::string_view(backend) != "planned") return;
    const InterpreterCounters c = interpreter_counters();
    std::printf("planned: %llu runs on the arena, %llu without (inputs off the plan), %llu out= calls refused\n",
                static_cast<unsigned long long>(c.planned_runs), static_cast<unsigned long long>(c.unplanned_runs),
                static_cast<unsigned long long>(c.out_calls_refused));
    EXPECT_GT(c.planned_runs, 0u);
    EXPECT_EQ(c.out_calls_refused, 0u);
  }
};
}  // namespace

::testing::Environment* planned_runs_check() { return new PlannedRunsCheck; }

}  // namespace aotpipe::testing
