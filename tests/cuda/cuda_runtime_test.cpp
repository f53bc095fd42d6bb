// The CUDA runtime on a GPU: programs compiled from CUDA tensors equal eager on CUDA (outputs,
// gradients, input mutations, aliasing), the compiled forward runs on the caller's current
// stream (checked by capturing it into a CUDA graph, which fails on any other stream), the
// backward follows the forward's stream, and many threads on many streams stay correct.
// Without a GPU every case is skipped with the reason.
#include <aotpipe/runtime/aot_function.h>

#include "cuda_cases.h"
#include "eager_check.h"

#include <ATen/ATen.h>
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/cuda.h>

#include <thread>

namespace aotpipe {
namespace {

using testing::cuda_randn;
using testing::kCuda;

TEST(Cuda, CorpusEqualsEager) {
  REQUIRE_GPU();
  for (const testing::CudaCase& c : testing::cuda_cases()) {
    SCOPED_TRACE(c.name);
    CompiledFunction compiled = aot_function(c.fn);
    testing::expect_matches_eager(c.fn, compiled, c.inputs, c.name, c.rtol, c.atol);
    // Every value of the compiled graphs is on the device eager used.
    auto state = compiled.compiled_state(c.inputs());
    ASSERT_TRUE(state->traced.training());
    for (const Node* n : state->traced.joint->graph.nodes())
      for (const Value* v : n->outputs())
        if (v->meta() && !v->meta()->sizes.empty())
          EXPECT_TRUE(v->meta()->device.is_cuda()) << c.name << " %" << v->name();
  }
}

TEST(Cuda, ForwardRunsOnTheCallersStream) {
  REQUIRE_GPU();
  // Inference (no grad): capture the compiled call into a CUDA graph on a side stream. Capture
  // fails if any kernel goes to another stream, so success proves the current stream is used.
  auto fn = [](const TensorList& a) { return TensorList{(a[0].sin() * a[1]).relu().sum(0)}; };
  CompiledFunction compiled = aot_function(fn);
  TensorList in{cuda_randn({64, 32}), cuda_randn({64, 32})};
  at::NoGradGuard no_grad;
  TensorList expected = fn(in);
  (void)compiled(in);  // compile and warm up outside the capture
  torch::cuda::synchronize();
  c10::cuda::CUDAStream side = c10::cuda::getStreamFromPool();
  at::cuda::CUDAGraph graph;
  TensorList out;
  {
    c10::cuda::CUDAStreamGuard guard(side);
    graph.capture_begin();
    out = compiled(in);
    graph.capture_end();
  }
  graph.replay();
  torch::cuda::synchronize();
  EXPECT_TRUE(at::allclose(out[0], expected[0], 1e-5, 1e-5));
}

TEST(Cuda, BackwardFollowsTheForwardStream) {
  REQUIRE_GPU();
  auto fn = [](const TensorList& a) { return TensorList{(a[0].cos() * a[1]).sum()}; };
  CompiledFunction compiled = aot_function(fn);
  for (int round = 0; round < 3; ++round) {
    TensorList x{cuda_randn({256, 256}, true), cuda_randn({256, 256}, true)};
    TensorList y{x[0].detach().clone().requires_grad_(true), x[1].detach().clone().requires_grad_(true)};
    c10::cuda::CUDAStream forward_stream = c10::cuda::getStreamFromPool();
    TensorList out;
    {
      c10::cuda::CUDAStreamGuard guard(forward_stream);
      out = compiled(x);
    }
    // Backward called from the default stream: autograd syncs with the forward's stream.
    out[0].backward();
    fn(y)[0].backward();
    torch::cuda::synchronize();
    EXPECT_TRUE(at::allclose(x[0].grad(), y[0].grad(), 1e-4, 1e-5));
    EXPECT_TRUE(at::allclose(x[1].grad(), y[1].grad(), 1e-4, 1e-5));
  }
}

TEST(Cuda, EightThreadsOnEightStreams) {
  REQUIRE_GPU();
  auto fn = [](const TensorList& a) { return TensorList{at::relu(at::addmm(a[2], a[0], a[1])).sum()}; };
  CompiledFunction compiled = aot_function(fn);
  std::atomic<int> mismatches{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      c10::cuda::CUDAStreamGuard guard(c10::cuda::getStreamFromPool());
      for (int i = 0; i < 20; ++i) {
        TensorList a{at::full({32, 64}, 0.01 * (t + 1), kCuda), at::full({64, 16}, 0.02, kCuda).requires_grad_(true),
                     at::full({16}, 0.1 * i, kCuda).requires_grad_(true)};
        TensorList out = compiled(a);
        out[0].backward();
        TensorList b{a[0], a[1].detach().clone().requires_grad_(true), a[2].detach().clone().requires_grad_(true)};
        fn(b)[0].backward();
        c10::cuda::getCurrentCUDAStream().synchronize();
        if (!at::allclose(out[0], fn(b)[0], 1e-4, 1e-4) || !at::allclose(a[1].grad(), b[1].grad(), 1e-4, 1e-4))
          ++mismatches;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(mismatches.load(), 0);
}

TEST(Cuda, DoubleBackwardParity) {
  REQUIRE_GPU();
  auto fn = [](const TensorList& a) { return TensorList{(a[0] * a[0]).sin().sum()}; };
  CompiledFunction compiled = aot_function(fn);
  at::Tensor x = cuda_randn({8}, true);
  at::Tensor g = torch::autograd::grad(compiled({x}), {x}, {}, true, /*create_graph=*/true)[0];
  at::Tensor ge = torch::autograd::grad(fn({x}), {x}, {}, true, true)[0];
  EXPECT_TRUE(at::allclose(g, ge, 1e-5, 1e-6));
  try {
    torch::autograd::grad({g.sum()}, {x});
    FAIL() << "expected an error";
  } catch (const std::exception& e) { EXPECT_THAT(e.what(), ::testing::HasSubstr("double backward")); }
}

}  // namespace
}  // namespace aotpipe
