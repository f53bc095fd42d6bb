// One ExportedProgram and one CompiledExportedProgram called from several threads at once, with
// sizes that need new specializations and new compiles while other threads run: every result
// equals the single-threaded eager one; and a program compiled in regions (data-dependent sizes)
// the same way. Also run under ThreadSanitizer with libtorch
// (concurrent_export_test_tsan, label tsan-torch).
#include "pt2_test_support.h"

#include <aotpipe/export/compiled_exported_program.h>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <thread>
#include <vector>

namespace aotpipe {
namespace {

TEST(ConcurrentExport, ThreadsSpecializeAndCompileOneProgram) {
  ExportedProgram program = load_exported_program(testing::pt2_dir() / "dynamic_mlp.pt2");
  CompiledExportedProgram compiled = compile_exported_program(program);
  torch::NoGradGuard no_grad;  // the threads share the parameters: no gradients to accumulate
  constexpr int kThreads = 4;
  constexpr int kCalls = 6;
  // Batches 2..9: threads ask for overlapping sizes, so some race to specialize the same size.
  std::vector<at::Tensor> inputs, expected;
  for (int b = 2; b < 2 + kThreads + kCalls; ++b) {
    inputs.push_back(torch::randn({b, 8}));
    expected.push_back(program({inputs.back()})[0]);
  }
  std::vector<int> mismatches(kThreads, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      torch::NoGradGuard thread_no_grad;  // grad mode is thread-local
      for (int c = 0; c < kCalls; ++c) {
        const std::size_t i = static_cast<std::size_t>(t + c);
        if (!at::allclose(compiled({inputs[i]})[0], expected[i], 1e-5, 1e-6)) ++mismatches[t];
        if (!at::allclose(program({inputs[i]})[0], expected[i], 1e-5, 1e-6)) ++mismatches[t];
      }
    });
  for (auto& th : threads) th.join();
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(mismatches[t], 0) << "thread " << t;
  EXPECT_EQ(compiled.num_compiled(), static_cast<std::size_t>(kThreads + kCalls - 1));  // one per size
}

// A program with data-dependent sizes compiled in regions (tests/export/data_dependent): threads
// race to build its regions and compile the router, each with its own routing.
TEST(ConcurrentExport, ThreadsCompileRegionsOfADataDependentProgram) {
  ExportedProgram program = load_exported_program(testing::data_dependent_dir() / "moe_routing.pt2");
  CompiledExportedProgram compiled = compile_exported_program(program);
  torch::NoGradGuard no_grad;
  constexpr int kThreads = 4;
  constexpr int kCalls = 3;
  std::vector<at::Tensor> inputs, expected;
  for (int i = 0; i < kThreads * kCalls; ++i) {
    inputs.push_back(torch::randn({10, 8}) * 3);
    expected.push_back(program({inputs.back()})[0]);
  }
  std::vector<int> mismatches(kThreads, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      torch::NoGradGuard thread_no_grad;
      for (int c = 0; c < kCalls; ++c) {
        const std::size_t i = static_cast<std::size_t>(t * kCalls + c);
        if (!at::allclose(compiled({inputs[i]})[0], expected[i], 1e-5, 1e-6)) ++mismatches[t];
      }
    });
  for (auto& th : threads) th.join();
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(mismatches[t], 0) << "thread " << t;
  EXPECT_EQ(compiled.num_compiled(), 1u);  // one inference compile of the router region
}

}  // namespace
}  // namespace aotpipe
