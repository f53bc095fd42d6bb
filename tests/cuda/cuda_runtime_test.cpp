// The CUDA runtime on a GPU: programs compiled from CUDA tensors equal eager on CUDA (outputs,
// gradients, input mutations, aliasing), the compiled forward runs on the caller's current
// stream (checked by capturing it into a CUDA graph, which fails on any other stream), the
// backward follows the forward's stream, and many threads on many streams stay correct; and
// aotpipe's Meta kernels of the CUDA-only fused attention kernels describe what those kernels
// return. Without a GPU every case is skipped with the reason.
#include <aotpipe/driver/aot_function.h>
#include <aotpipe/tracer/internal/meta_kernels.h>

#include "cuda_cases.h"
#include "eager_check.h"

#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/cuda.h>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <iostream>
#include <map>
#include <optional>
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

// ---- the fused attention kernels' Meta kernels against the CUDA kernels ----

c10::IValue as_meta(const c10::IValue& v) {
  if (!v.isTensor() || !v.toTensor().defined()) return v;
  const at::Tensor& t = v.toTensor();
  return at::empty_strided(t.sizes(), t.strides(), t.options().device(c10::kMeta));
}

// Runs `name` on the CUDA arguments and on meta copies of them (aotpipe's Meta kernel); returns
// the CUDA results, or nothing when the CUDA kernel refuses the arguments (a kernel that does not
// support this dtype or layout on this GPU).
std::optional<std::vector<c10::IValue>> compare_with_meta(const std::string& name, const std::vector<c10::IValue>& args,
                                                          const std::string& label) {
  const c10::OperatorHandle op = c10::Dispatcher::singleton().findSchemaOrThrow(name.c_str(), "");
  std::vector<c10::IValue> real = args;
  try {
    op.callBoxed(real);
  } catch (const c10::Error&) { return std::nullopt; }
  std::vector<c10::IValue> meta;
  for (const c10::IValue& a : args) meta.push_back(as_meta(a));
  op.callBoxed(meta);
  EXPECT_EQ(meta.size(), real.size()) << label;
  for (std::size_t k = 0; k < std::min(meta.size(), real.size()); ++k) {
    const std::string where = fmt::format("{} result {}", label, k);
    if (real[k].isTensor()) {
      if (!meta[k].isTensor()) {
        ADD_FAILURE() << where << ": the Meta kernel returns " << meta[k].tagKind() << ", CUDA a tensor";
        continue;
      }
      const at::Tensor &r = real[k].toTensor(), &m = meta[k].toTensor();
      EXPECT_EQ(m.defined(), r.defined()) << where;
      if (!r.defined() || !m.defined()) continue;
      EXPECT_EQ(m.sizes(), r.sizes()) << where;
      EXPECT_EQ(m.scalar_type(), r.scalar_type()) << where;
      for (int64_t d = 0; d < r.dim(); ++d)  // a stride of a size-1 dimension is arbitrary
        if (r.size(d) > 1) EXPECT_EQ(m.stride(d), r.stride(d)) << where << " stride " << d << " of " << r.sizes();
    } else {
      EXPECT_EQ(meta[k], real[k]) << where;
    }
  }
  return real;
}

TEST(Cuda, AttentionMetaKernelsMatchCuda) {
  REQUIRE_GPU();
  detail::link_meta_kernels();
  std::map<std::string, int> compared;
  for (at::ScalarType dtype : {at::kFloat, at::kBFloat16, at::kHalf})
    for (bool bthd : {false, true})  // [B, H, T, D] contiguous, or a permuted view of [B, T, H, D]
      for (auto [tq, tk] : {std::pair<int64_t, int64_t>{16, 16}, {37, 21}})
        for (bool causal : {false, true})
          for (bool bias : {false, true}) {
            const std::string label = fmt::format("{} {} tq={} tk={} causal={} bias={}", c10::toString(dtype),
                                                  bthd ? "bthd" : "bhtd", tq, tk, causal, bias);
            auto make = [&](int64_t t) {
              at::Tensor x =
                  bthd ? at::randn({2, t, 4, 64}, at::TensorOptions().dtype(dtype).device(kCuda)).transpose(1, 2)
                       : at::randn({2, 4, t, 64}, at::TensorOptions().dtype(dtype).device(kCuda));
              return x;
            };
            const at::Tensor q = make(tq), k = make(tk), v = make(tk), grad = at::randn_like(q);
            const c10::IValue attn_bias = bias ? c10::IValue(at::randn({2, 4, tq, tk}, q.options())) : c10::IValue();
            const at::Tensor bias_tensor = bias ? attn_bias.toTensor() : at::Tensor();
            if (auto fw =
                    compare_with_meta("aten::_scaled_dot_product_efficient_attention",
                                      {q, k, v, attn_bias, true, 0.0, causal, c10::IValue()}, "efficient " + label)) {
              ++compared["efficient"];
              if (compare_with_meta("aten::_scaled_dot_product_efficient_attention_backward",
                                    {grad, q, k, v, bias_tensor, (*fw)[0], (*fw)[1], (*fw)[2], (*fw)[3], 0.0,
                                     c10::List<bool>({true, true, true, bias}), causal, c10::IValue()},
                                    "efficient backward " + label))
                ++compared["efficient backward"];
            }
            if (bias) continue;
            if (auto fw = compare_with_meta("aten::_scaled_dot_product_flash_attention",
                                            {q, k, v, 0.0, causal, false, c10::IValue()}, "flash " + label)) {
              ++compared["flash"];
              const auto& f = *fw;
              if (compare_with_meta(
                      "aten::_scaled_dot_product_flash_attention_backward",
                      {grad, q, k, v, f[0], f[1], f[2], f[3], f[4], f[5], 0.0, causal, f[6], f[7], c10::IValue()},
                      "flash backward " + label))
                ++compared["flash backward"];
            }
            if (auto fw = compare_with_meta("aten::_scaled_dot_product_cudnn_attention",
                                            {q, k, v, c10::IValue(), true, 0.0, causal, false, c10::IValue()},
                                            "cudnn " + label)) {
              ++compared["cudnn"];
              const auto& f = *fw;
              if (compare_with_meta("aten::_scaled_dot_product_cudnn_attention_backward",
                                    {grad, q, k, v, f[0], f[1], f[6], f[7], at::Tensor(), f[2], f[3], f[4], f[5], 0.0,
                                     causal, c10::IValue()},
                                    "cudnn backward " + label))
                ++compared["cudnn backward"];
            }
          }
  for (const char* op : {"efficient", "efficient backward", "flash", "flash backward", "cudnn", "cudnn backward"})
    EXPECT_GT(compared[op], 0) << op << ": the CUDA kernel accepted no sample";
  for (const auto& [op, n] : compared) std::cout << op << ": " << n << " samples compared\n";
}

// The FFT primitives' Meta kernels (tracer/meta/spectral.cpp) follow cuFFT's passes for a CUDA
// device hint: against the CUDA kernels, over layouts and sets of dimensions that take each path
// (one pass; more than three dimensions; r2c/c2r over dimensions 0 and 1, cuFFT's slow path).
TEST(Cuda, SpectralMetaKernelsMatchCuda) {
  REQUIRE_GPU();
  detail::link_meta_kernels();
  const detail::MetaDeviceHintScope hint(kCuda);
  const std::vector<std::vector<int64_t>> dim_sets = {{3},    {0},    {1, 2},    {2, 1},
                                                      {0, 2}, {0, 1}, {0, 1, 2}, {0, 1, 2, 3}};
  auto layouts = [](at::ScalarType dtype) {
    const auto options = at::TensorOptions().dtype(dtype).device(kCuda);
    return std::vector<std::pair<std::string, at::Tensor>>{
        {"contiguous", at::randn({2, 3, 4, 6}, options)},
        {"transposed", at::randn({2, 3, 6, 4}, options).transpose(2, 3)},
        {"permuted", at::randn({6, 2, 4, 3}, options).permute({1, 3, 2, 0})}};
  };
  std::size_t compared = 0;
  for (const auto& dims : dim_sets) {
    for (const auto& [layout, x] : layouts(at::kComplexFloat)) {
      for (bool forward : {true, false})
        compared += compare_with_meta("aten::_fft_c2c", {x, dims, int64_t{0}, forward},
                                      fmt::format("_fft_c2c {} dims={} forward={}", layout, dims, forward))
                        .has_value();
      for (int64_t odd : {0, 1}) {
        const int64_t last = 2 * (x.size(dims.back()) - 1) + odd;
        compared += compare_with_meta("aten::_fft_c2r", {x, dims, int64_t{0}, last},
                                      fmt::format("_fft_c2r {} dims={} last={}", layout, dims, last))
                        .has_value();
      }
    }
    for (const auto& [layout, x] : layouts(at::kFloat))
      for (bool onesided : {true, false})
        compared += compare_with_meta("aten::_fft_r2c", {x, dims, int64_t{0}, onesided},
                                      fmt::format("_fft_r2c {} dims={} onesided={}", layout, dims, onesided))
                        .has_value();
  }
  EXPECT_GT(compared, 100u) << "the CUDA kernels refused most samples";
}

}  // namespace
}  // namespace aotpipe
