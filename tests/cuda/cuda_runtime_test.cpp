// The CUDA runtime on a GPU: programs compiled from CUDA tensors equal eager on CUDA (outputs,
// gradients, input mutations, aliasing), the compiled forward runs on the caller's current
// stream (checked by capturing it into a CUDA graph, which fails on any other stream), the
// backward follows the forward's stream, and many threads on many streams stay correct.
// Without a GPU every case is skipped with the reason.
#include <aotpipe/runtime/aot_function.h>

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

#define REQUIRE_GPU()                                                            \
  if (!torch::cuda::is_available())                                              \
  GTEST_SKIP() << "no CUDA GPU on this machine (torch::cuda::is_available() is " \
                  "false)"

const c10::Device kCuda(c10::kCUDA, 0);

// Inputs drawn on the CPU from a fixed seed, then moved: identical for eager and compiled.
at::Tensor cuda_randn(std::vector<int64_t> sizes, bool requires_grad = false) {
  return at::randn(sizes).to(kCuda).requires_grad_(requires_grad);
}

struct Case {
  std::string name;
  Function fn;
  std::function<TensorList()> inputs;
  double rtol = 1e-4, atol = 1e-5;
};

std::vector<Case> cases() {
  std::vector<Case> c;
  c.push_back({"mlp", [](const TensorList& a) { return TensorList{at::relu(at::addmm(a[2], a[0], a[1])).sum(1)}; },
               [] {
                 return TensorList{cuda_randn({8, 16}), cuda_randn({16, 32}, true), cuda_randn({32}, true)};
               }});
  c.push_back({"factories",
               [](const TensorList& a) {
                 const at::Tensor& x = a[0];
                 at::Tensor y = x * at::ones_like(x) + at::zeros({4, 8}, x.options()) + at::arange(8, x.options()) +
                                x.new_zeros({4, 8});
                 return TensorList{y.sin()};
               },
               [] {
                 return TensorList{cuda_randn({4, 8}, true)};
               }});
  c.push_back({"bf16_mm",
               [](const TensorList& a) {
                 return TensorList{at::mm(a[0].to(at::kBFloat16), a[1].to(at::kBFloat16)).to(at::kFloat)};
               },
               [] {
                 return TensorList{cuda_randn({8, 16}, true), cuda_randn({16, 4}, true)};
               },
               2e-2, 2e-2});
  c.push_back({"fp16_linear", [](const TensorList& a) { return TensorList{at::gelu(at::linear(a[0], a[1]))}; },
               [] {
                 return TensorList{cuda_randn({8, 16}).to(at::kHalf).requires_grad_(true),
                                   cuda_randn({4, 16}).to(at::kHalf).requires_grad_(true)};
               },
               1e-2, 1e-2});
  c.push_back({"conv_bn_train",
               [](const TensorList& a) {
                 at::Tensor y = at::conv2d(a[0], a[1], a[2], 1, 1);
                 y = at::batch_norm(y, a[3], a[4], a[5], a[6], true, 0.1, 1e-5, true);
                 return TensorList{at::relu(y)};
               },
               [] {
                 return TensorList{cuda_randn({2, 3, 8, 8}, true),
                                   cuda_randn({4, 3, 3, 3}, true),
                                   cuda_randn({4}, true),
                                   cuda_randn({4}, true),
                                   cuda_randn({4}, true),
                                   at::zeros({4}, kCuda),
                                   at::ones({4}, kCuda)};
               },
               1e-3, 1e-4});
  c.push_back(
      {"nll_loss_cpu_scale",
       [](const TensorList& a) { return TensorList{at::nll_loss(at::log_softmax(a[0], 1), a[1]) * a[2]}; },
       [] {
         return TensorList{cuda_randn({6, 10}, true), at::randint(0, 10, {6}).to(kCuda), at::scalar_tensor(0.5)};
       }});
  c.push_back({"input_mutation",
               [](const TensorList& a) {
                 a[1].mul_(0.9).add_(a[0].detach().mean(0), 0.1);
                 return TensorList{(a[0] - a[1]).pow(2).sum()};
               },
               [] {
                 return TensorList{cuda_randn({4, 5}, true), at::zeros({5}, kCuda)};
               }});
  c.push_back({"output_views",
               [](const TensorList& a) {
                 return TensorList{a[0].view(-1), a[0].t(), a[0] * 2};
               },
               [] {
                 return TensorList{cuda_randn({3, 4}, true)};
               }});
  c.push_back({"softmax_layer_norm",
               [](const TensorList& a) { return TensorList{at::layer_norm(at::softmax(a[0], -1), {16}, a[1], a[2])}; },
               [] {
                 return TensorList{cuda_randn({4, 16}, true), cuda_randn({16}, true), cuda_randn({16}, true)};
               }});
  c.push_back({"dropout_shape_only", [](const TensorList& a) { return TensorList{at::dropout(a[0], 0.0, true) * 2}; },
               [] { return TensorList{cuda_randn({32}, true)}; }});
  return c;
}

TEST(Cuda, CorpusEqualsEager) {
  REQUIRE_GPU();
  for (const Case& c : cases()) {
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
