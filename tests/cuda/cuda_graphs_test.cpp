// The CUDA-graph backend on a GPU (docs/cuda-graphs.md): compiled programs equal eager when their
// graphs are captured and replayed (outputs, gradients, input mutations, aliasing), across
// optimizer steps with gradient accumulation, with parameters at a new address, with a pending
// backward, with dropout, with 0-dim CPU scalars, on 8 threads x 8 streams, and without memory
// growth over 10,000 calls. The process-wide counters say which calls replayed and which ran in
// the interpreter. Without a GPU every case is skipped with the reason.
#include <aotpipe/cache/compile_cache.h>
#include <aotpipe/cuda/cuda_graphs.h>
#include <aotpipe/driver/aot_function.h>

#include "../runtime/temp_dir.h"
#include "cuda_cases.h"
#include "eager_check.h"

#include <ATen/ATen.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <torch/cuda.h>

#include <atomic>
#include <iostream>
#include <thread>

namespace aotpipe {
namespace {

using testing::cuda_randn;
using testing::kCuda;

AotConfig graphs_config(CudaGraphOptions options = {}) {
  AotConfig config;
  config.fw_compiler = backends::cuda_graphs(options);
  return config;
}

const CudaGraphOptions kCopyAll{.outputs = CudaGraphOptions::Outputs::fresh, .static_parameters = false};
const CudaGraphOptions kStaticAlias{.outputs = CudaGraphOptions::Outputs::static_alias, .static_parameters = true};
const CudaGraphOptions kLendSaved{.lend_saved_outputs = true};

// The counters' change over a scope.
struct CounterDelta {
  CudaGraphCounters start = cuda_graph_counters();
  std::uint64_t captures() const { return cuda_graph_counters().captures - start.captures; }
  std::uint64_t replays() const { return cuda_graph_counters().replays - start.replays; }
  std::uint64_t fallbacks() const { return cuda_graph_counters().fallback_calls - start.fallback_calls; }
  std::uint64_t pools() const { return cuda_graph_counters().memory_pools - start.memory_pools; }
  std::uint64_t lent() const { return cuda_graph_counters().lent_values - start.lent_values; }
  std::uint64_t lent_copied() const { return cuda_graph_counters().lent_values_copied - start.lent_values_copied; }
  std::uint64_t lent_read() const { return cuda_graph_counters().lent_inputs_read - start.lent_inputs_read; }
};

bool close(const at::Tensor& a, const at::Tensor& b, double tol = 1e-5) { return at::allclose(a, b, tol, tol); }

TEST(CudaGraphs, CasesEqualEagerWhenReplayed) {
  REQUIRE_GPU();
  for (const CudaGraphOptions& options : {CudaGraphOptions{}, kCopyAll}) {
    for (const testing::CudaCase& c : testing::cuda_cases()) {
      const std::string label = c.name + (options.static_parameters ? "" : " (copy all)");
      SCOPED_TRACE(label);
      CounterDelta counts;
      CompiledFunction compiled = aot_function(c.fn, graphs_config(options));
      // Each call makes new inputs: the first call captures with its own; with kCopyAll the
      // second replays too, by default its new parameters send it to the interpreter.
      testing::expect_matches_eager(c.fn, compiled, c.inputs, label, c.rtol, c.atol);
      testing::expect_matches_eager(c.fn, compiled, c.inputs, label + " second call", c.rtol, c.atol);
      EXPECT_EQ(counts.captures(), 2u) << "forward and backward captured";
      EXPECT_EQ(counts.pools(), 1u) << "into one memory pool";
      EXPECT_GE(counts.replays(), 2u);
      if (!options.static_parameters) EXPECT_EQ(counts.fallbacks(), 0u) << "every call replays";
    }
  }
}

TEST(CudaGraphs, ReplaysReadEachCallsInputs) {
  REQUIRE_GPU();
  auto fn = [](const TensorList& a) {
    at::Tensor x = a[0];
    for (int i = 0; i < 10; ++i) x = (x * 1.01).sin() + a[1];
    return TensorList{x, x.sum()};
  };
  CompiledFunction compiled = aot_function(fn, graphs_config());
  at::NoGradGuard no_grad;
  CounterDelta counts;
  for (int call = 0; call < 4; ++call) {
    TensorList in{cuda_randn({256}), cuda_randn({256})};
    TensorList expected = fn(in);
    TensorList got = compiled(in);
    EXPECT_TRUE(close(got[0], expected[0])) << "call " << call;
    EXPECT_TRUE(close(got[1], expected[1])) << "call " << call;
  }
  EXPECT_EQ(counts.captures(), 1u);
  EXPECT_EQ(counts.replays(), 4u);
  EXPECT_EQ(counts.fallbacks(), 0u);
}

// Two micro-batches accumulate into .grad, then an in-place SGD step; parameters are read in
// place, so each replay sees the step's update. Eager does the same on its own copies.
TEST(CudaGraphs, GradientsAccumulateAcrossOptimizerSteps) {
  REQUIRE_GPU();
  auto fn = [](const TensorList& a) {
    at::Tensor h = at::relu(at::linear(a[0], a[1], a[2]));
    return TensorList{at::linear(h, a[3]).pow(2).mean()};
  };
  TensorList params{cuda_randn({32, 16}, true), cuda_randn({32}, true), cuda_randn({4, 32}, true)};
  TensorList eager_params;
  for (const at::Tensor& p : params) eager_params.push_back(p.detach().clone().requires_grad_(true));
  CompiledFunction compiled = aot_function(fn, graphs_config());
  CounterDelta counts;
  for (int step = 0; step < 4; ++step) {
    for (int micro = 0; micro < 2; ++micro) {
      at::Tensor x = cuda_randn({8, 16});
      compiled({x, params[0], params[1], params[2]})[0].backward();
      fn({x, eager_params[0], eager_params[1], eager_params[2]})[0].backward();
    }
    for (std::size_t i = 0; i < params.size(); ++i) {
      EXPECT_TRUE(close(params[i].grad(), eager_params[i].grad(), 1e-4)) << "step " << step << " param " << i;
      at::NoGradGuard no_grad;
      params[i].sub_(params[i].grad() * 0.1);
      eager_params[i].sub_(eager_params[i].grad() * 0.1);
      params[i].mutable_grad().zero_();
      eager_params[i].mutable_grad().zero_();
    }
  }
  for (std::size_t i = 0; i < params.size(); ++i) EXPECT_TRUE(close(params[i], eager_params[i], 1e-4)) << i;
  EXPECT_EQ(counts.captures(), 2u);
  EXPECT_EQ(counts.replays(), 16u) << "8 forwards and 8 backwards";
  EXPECT_EQ(counts.fallbacks(), 0u);
}

TEST(CudaGraphs, AParameterAtANewAddressRunsInTheInterpreter) {
  REQUIRE_GPU();
  auto fn = [](const TensorList& a) { return TensorList{(a[0].matmul(a[1])).tanh().sum()}; };
  CompiledFunction compiled = aot_function(fn, graphs_config());
  at::Tensor x = cuda_randn({8, 8});
  at::Tensor w1 = cuda_randn({8, 8}, true);
  at::Tensor w2 = cuda_randn({8, 8}, true);
  (void)compiled({x, w1});
  CounterDelta counts;
  at::Tensor out = compiled({x, w2})[0];
  out.backward();
  EXPECT_TRUE(close(out, fn({x, w2})[0]));
  at::Tensor w2_eager = w2.detach().clone().requires_grad_(true);
  fn({x, w2_eager})[0].backward();
  EXPECT_TRUE(close(w2.grad(), w2_eager.grad()));
  EXPECT_EQ(counts.fallbacks(), 1u) << "the forward reads w in place: w2 is not the captured w1";
  EXPECT_EQ(counts.replays(), 1u) << "the backward copies its inputs in: it replays";
  (void)compiled({x, w1});
  EXPECT_EQ(counts.fallbacks(), 1u) << "w1 again: replayed";
}

// Two forwards before either backward: the second replay must not overwrite what the first
// saved for its backward.
TEST(CudaGraphs, APendingBackwardKeepsItsActivations) {
  REQUIRE_GPU();
  auto fn = [](const TensorList& a) { return TensorList{(a[0] * a[1]).sin().cos().sum()}; };
  for (const CudaGraphOptions& options : {CudaGraphOptions{}, kLendSaved, kStaticAlias}) {
    const bool alias = options.outputs == CudaGraphOptions::Outputs::static_alias;
    const bool lend = !alias && options.lend_saved_outputs;
    SCOPED_TRACE(alias ? "static_alias" : lend ? "fresh, saved values lent" : "fresh, saved values copied");
    CompiledFunction compiled = aot_function(fn, graphs_config(options));
    at::Tensor w = cuda_randn({64}, true);
    at::Tensor w_eager = w.detach().clone().requires_grad_(true);
    at::Tensor x1 = cuda_randn({64}), x2 = cuda_randn({64});
    CounterDelta counts;
    at::Tensor out1 = compiled({x1, w})[0];
    at::Tensor out2 = compiled({x2, w})[0];
    out2.backward();
    out1.backward();
    fn({x2, w_eager})[0].backward();
    fn({x1, w_eager})[0].backward();
    EXPECT_TRUE(close(out1, fn({x1, w_eager})[0]));
    EXPECT_TRUE(close(w.grad(), w_eager.grad()));
    if (alias) {
      EXPECT_GE(counts.fallbacks(), 1u) << "the second forward ran while the first's outputs were saved";
    } else if (lend) {
      EXPECT_GE(counts.lent_copied(), 1u) << "the second forward took back what the first had lent";
      EXPECT_EQ(counts.fallbacks(), 1u) << "the first backward: its saved values are no longer in static memory";
    } else {
      EXPECT_EQ(counts.fallbacks(), 0u) << "fresh outputs: every call replays";
      EXPECT_EQ(counts.lent(), 0u);
    }
    EXPECT_EQ(counts.pools(), alias ? 2u : 1u) << "static outputs: forward and backward keep pools apart";
  }
}

TEST(CudaGraphs, StaticAliasOutputsHoldUntilTheNextCall) {
  REQUIRE_GPU();
  auto fn = [](const TensorList& a) { return TensorList{a[0].exp() + 1}; };
  CompiledFunction compiled = aot_function(fn, graphs_config(kStaticAlias));
  at::NoGradGuard no_grad;
  at::Tensor x1 = cuda_randn({128}), x2 = cuda_randn({128});
  CounterDelta counts;
  at::Tensor held = compiled({x1})[0];
  at::Tensor second = compiled({x2})[0];  // `held` is alive: this call must not overwrite it
  EXPECT_TRUE(close(held, fn({x1})[0]));
  EXPECT_TRUE(close(second, fn({x2})[0]));
  EXPECT_EQ(counts.fallbacks(), 1u);
  held.reset();
  second.reset();
  EXPECT_TRUE(close(compiled({x2})[0], fn({x2})[0]));
  EXPECT_EQ(counts.replays(), 2u) << "nothing alive: replayed";
}

TEST(CudaGraphs, DropoutDrawsAfreshAtEachReplay) {
  REQUIRE_GPU();
  auto fn = [](const TensorList& a) { return TensorList{at::dropout(a[0], 0.5, /*train=*/true)}; };
  CompiledFunction compiled = aot_function(fn, graphs_config());
  at::Tensor x = at::ones({1 << 16}, kCuda).requires_grad_(true);
  CounterDelta counts;
  at::Tensor a = compiled({x})[0];
  at::Tensor b = compiled({x})[0];
  EXPECT_EQ(counts.fallbacks(), 0u);
  EXPECT_FALSE(at::equal(a, b)) << "two replays drew the same mask";
  for (const at::Tensor& out : {a, b}) {
    const double kept = (out != 0).to(at::kDouble).mean().item<double>();
    EXPECT_NEAR(kept, 0.5, 0.01);
    EXPECT_TRUE(at::equal(out.masked_select(out != 0), at::full({out.count_nonzero().item<int64_t>()}, 2.0, kCuda)));
  }
  b.sum().backward();
  EXPECT_TRUE(at::equal(x.grad(), (b != 0).to(at::kFloat) * 2)) << "the backward used the replay's own mask";
}

TEST(CudaGraphs, ACpuScalarIsReadAtEveryCall) {
  REQUIRE_GPU();
  auto fn = [](const TensorList& a) { return TensorList{a[0] * a[1] + a[1]}; };
  CompiledFunction compiled = aot_function(fn, graphs_config());
  at::Tensor x = cuda_randn({16}, true);
  CounterDelta counts;
  for (double scale : {0.5, 3.0, -2.0}) {
    TensorList in{x, at::scalar_tensor(scale)};
    EXPECT_TRUE(close(compiled(in)[0], fn(in)[0])) << scale;
  }
  EXPECT_EQ(counts.fallbacks(), 0u);
  EXPECT_EQ(counts.replays(), 3u);
}

TEST(CudaGraphs, ARefusedGraphRunsInTheInterpreterAndSaysWhy) {
  REQUIRE_GPU();
  auto fn = [](const TensorList& a) { return TensorList{a[0].sin(), a[0].to(at::kCPU) * 2}; };
  TensorList in{cuda_randn({4, 8}, true)};
  CompileOutput out = compile("host_copy", fn, in, graphs_config());
  ASSERT_FALSE(out.state()->compiled.notes.empty());
  EXPECT_THAT(out.state()->compiled.notes[0], ::testing::HasSubstr("aten::_to_copy makes"));
  CompiledFunction compiled = aot_function(fn, graphs_config());
  testing::expect_matches_eager(
      fn, compiled, [&] { return in; }, "host_copy");
}

// One compiled function shared by 8 threads, each on its own stream (every input copied in, so
// every call replays the one captured graph, serialized), and one compiled function per thread.
TEST(CudaGraphs, EightThreadsOnEightStreams) {
  REQUIRE_GPU();
  auto fn = [](const TensorList& a) { return TensorList{at::relu(at::addmm(a[2], a[0], a[1])).pow(2).sum()}; };
  for (const bool lend : {false, true}) {
    SCOPED_TRACE(lend ? "saved values lent" : "saved values copied");
    CudaGraphOptions shared_options = kCopyAll;
    shared_options.lend_saved_outputs = lend;
    CompiledFunction shared = aot_function(fn, graphs_config(shared_options));
    std::atomic<int> mismatches{0};
    CounterDelta counts;
    std::vector<std::thread> threads;
    for (int t = 0; t < 8; ++t) {
      threads.emplace_back([&, t] {
        const c10::cuda::CUDAStreamGuard guard(c10::cuda::getStreamFromPool());
        CompiledFunction own = aot_function(fn, graphs_config());
        at::Tensor w = at::full({64, 16}, 0.01 * (t + 1), kCuda).requires_grad_(true);
        for (int i = 0; i < 30; ++i) {
          TensorList a{at::full({32, 64}, 0.01 * (t + 1), kCuda) + at::arange(64, kCuda) * 1e-3,
                       at::full({64, 16}, 0.02 * (i + 1), kCuda).requires_grad_(true),
                       at::full({16}, 0.1 * i - 1, kCuda).requires_grad_(true)};
          TensorList b{a[0], a[1].detach().clone().requires_grad_(true), a[2].detach().clone().requires_grad_(true)};
          at::Tensor got = shared(a)[0];
          got.backward();
          at::Tensor expected = fn(b)[0];
          expected.backward();
          at::Tensor own_got = own({a[0], w, a[2].detach()})[0];
          at::Tensor own_expected = fn({a[0], w.detach(), a[2].detach()})[0];
          c10::cuda::getCurrentCUDAStream().synchronize();
          if (!close(got, expected, 1e-4) || !close(a[1].grad(), b[1].grad(), 1e-4) ||
              !close(a[2].grad(), b[2].grad(), 1e-4) || !close(own_got, own_expected, 1e-4))
            ++mismatches;
        }
      });
    }
    for (std::thread& th : threads) th.join();
    EXPECT_EQ(mismatches.load(), 0);
    EXPECT_EQ(counts.replays() + counts.fallbacks(), 8u * 30u * 3u) << "shared forward + backward, own forward";
    // Threads interleave the shared function's forwards and backwards: a forward replaying before
    // another thread's backward takes back what that backward was lent, which then interprets.
    EXPECT_LE(counts.fallbacks(), counts.lent_copied());
    if (lend) {
      EXPECT_GT(counts.lent(), 0u) << "the shared forward lent its saved values";
      std::cout << "8 threads, lent: " << counts.lent() << " lent, " << counts.lent_read() << " read in place, "
                << counts.lent_copied() << " taken back, " << counts.fallbacks() << " interpreted\n";
    } else {
      EXPECT_EQ(counts.fallbacks(), 0u);
    }
  }
}

// A training step lends the forward's saved values to the backward: nothing is copied out of the
// forward or into the backward, every call replays. A retained graph keeps them valid: its second
// backward reads them again, and a forward replaying meanwhile copies them out first.
TEST(CudaGraphs, SavedValuesAreLentToTheBackwardNotCopied) {
  REQUIRE_GPU();
  auto fn = [](const TensorList& a) {
    at::Tensor h = at::gelu(at::linear(a[0], a[1], a[2]));
    return TensorList{at::linear(at::tanh(h) * h, a[3]).pow(2).mean()};
  };
  TensorList params{cuda_randn({64, 32}, true), cuda_randn({64}, true), cuda_randn({8, 64}, true)};
  TensorList eager_params;
  for (const at::Tensor& p : params) eager_params.push_back(p.detach().clone().requires_grad_(true));
  CompiledFunction compiled = aot_function(fn, graphs_config(kLendSaved));
  auto expect_grads_equal = [&](const std::string& when) {
    for (std::size_t i = 0; i < params.size(); ++i)
      EXPECT_TRUE(close(params[i].grad(), eager_params[i].grad(), 1e-4)) << when << ", param " << i;
  };
  auto reset = [&] {
    for (std::size_t i = 0; i < params.size(); ++i) {
      params[i].mutable_grad().reset();
      eager_params[i].mutable_grad().reset();
    }
  };
  compiled({cuda_randn({16, 32}), params[0], params[1], params[2]})[0].backward();  // the captures
  reset();
  CounterDelta counts;
  for (int step = 0; step < 5; ++step) {
    at::Tensor x = cuda_randn({16, 32});
    compiled({x, params[0], params[1], params[2]})[0].backward();
    fn({x, eager_params[0], eager_params[1], eager_params[2]})[0].backward();
    expect_grads_equal("step " + std::to_string(step));
    reset();
  }
  EXPECT_EQ(counts.replays(), 10u);
  EXPECT_EQ(counts.fallbacks(), 0u);
  EXPECT_GE(counts.lent(), 5u) << "each forward lends its saved values";
  EXPECT_GE(counts.lent_read(), 5u) << "each backward reads them in place";
  EXPECT_EQ(counts.lent_copied(), 0u) << "each backward ran before the next forward: nothing to take back";

  at::Tensor x = cuda_randn({16, 32});
  at::Tensor out = compiled({x, params[0], params[1], params[2]})[0];
  at::Tensor eager_out = fn({x, eager_params[0], eager_params[1], eager_params[2]})[0];
  out.backward({}, /*retain_graph=*/true);
  eager_out.backward({}, /*retain_graph=*/true);
  out.backward({}, /*retain_graph=*/true);
  eager_out.backward({}, /*retain_graph=*/true);
  expect_grads_equal("a retained graph's second backward");
  EXPECT_EQ(counts.lent_copied(), 0u);
  (void)compiled({cuda_randn({16, 32}), params[0], params[1], params[2]});  // overwrites the static memory
  EXPECT_GE(counts.lent_copied(), 1u) << "the retained graph's saved values were taken back first";
  out.backward();
  eager_out.backward();
  expect_grads_equal("a third backward after another forward");
}

// A cache hit compiles its graphs when the forward first runs, the backward with it, so the
// forward lends from its first replay on and the backward, captured then, reads in place at every
// step, as after a compile (were the backward compiled at its own first call, it would have
// captured copies of what the first forward could not lend, for good).
TEST(CudaGraphs, ACacheHitLendsFromItsFirstStep) {
  REQUIRE_GPU();
  auto fn = [](const TensorList& a) { return TensorList{at::tanh(at::linear(a[0], a[1])).pow(2).sum()}; };
  const testing::TempDir dir;
  CompileCacheOptions cache_options;
  cache_options.directory = dir.path;
  auto cache = std::make_shared<CompileCache>(std::move(cache_options));
  const at::Tensor w = cuda_randn({16, 32}, true);
  for (const std::size_t hits : {0u, 1u}) {
    SCOPED_TRACE(hits ? "a hit" : "a miss");
    CompiledFunction f = aot_function(fn, graphs_config(kLendSaved), cache);
    CounterDelta counts;
    for (int step = 0; step < 3; ++step) {
      const at::Tensor x = cuda_randn({8, 32});
      w.mutable_grad().reset();
      f({x, w})[0].backward();
      const at::Tensor w_eager = w.detach().clone().requires_grad_(true);
      fn({x, w_eager})[0].backward();
      EXPECT_TRUE(close(w.grad(), w_eager.grad(), 1e-4)) << "step " << step;
    }
    EXPECT_EQ(cache->counters().hits, hits);
    EXPECT_EQ(cache->counters().misses, 1u);
    EXPECT_EQ(counts.fallbacks(), 0u);
    EXPECT_GE(counts.lent(), 3u) << "every forward lent";
    EXPECT_GE(counts.lent_read(), 3u) << "every backward, the first included, read in place";
  }
}

TEST(CudaGraphs, MemoryStaysFlatOver10000Calls) {
  REQUIRE_GPU();
  auto fn = [](const TensorList& a) {
    return TensorList{at::linear(at::gelu(at::linear(a[0], a[1], a[2])), a[3]).sum()};
  };
  CompiledFunction compiled = aot_function(fn, graphs_config());
  TensorList params{cuda_randn({128, 64}, true), cuda_randn({128}, true), cuda_randn({8, 128}, true)};
  at::Tensor x = cuda_randn({32, 64});
  auto step = [&] {
    compiled({x, params[0], params[1], params[2]})[0].backward();
    for (at::Tensor& p : params) p.mutable_grad().reset();
  };
  for (int i = 0; i < 100; ++i) step();
  torch::cuda::synchronize();
  const auto allocated = [] {
    return c10::cuda::CUDACachingAllocator::getDeviceStats(0)
        .allocated_bytes[static_cast<std::size_t>(c10::CachingAllocator::StatType::AGGREGATE)]
        .current;
  };
  const int64_t before = allocated();
  CounterDelta counts;
  for (int i = 0; i < 10000; ++i) step();
  torch::cuda::synchronize();
  EXPECT_EQ(allocated(), before) << "bytes allocated after 100 calls vs after 10,100";
  EXPECT_EQ(counts.replays(), 20000u);
}

}  // namespace
}  // namespace aotpipe
