// Concurrent compiles against eager PyTorch: several threads each compile and run a different
// function at the same moment (aot_function, a shared CompiledFunction, compile_batch), and
// every result is compared with eager (outputs, aliasing, inputs after the call, gradients).
// Under ThreadSanitizer (build-tsan-torch, scripts/test-tsan-torch) it also checks that the
// compile path (pipeline on the oneTBB pool, forward/backward compiled inline or with when_all,
// the tracer, the signature cache) has no data race.
#include <aotpipe/driver/aot_function.h>
#include <aotpipe/driver/compile_batch.h>
#include <aotpipe/pipeline/scheduler.h>
#include <aotpipe/backend/backends.h>
#include <aotpipe/stages/partition/default_partition.h>
#include <aotpipe/stages/partition/min_cut_partition.h>

#include "eager_check.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>

#include <exception>
#include <functional>
#include <latch>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace aotpipe {
namespace {

constexpr int kThreads = 8;

// Inputs come from a generator of their own, never the global one: other threads reseed and
// draw from the global generator at the same time.
using MakeInputs = std::function<TensorList(at::Generator&)>;

struct Case {
  std::string name;
  Function fn;
  MakeInputs make_inputs;
};

at::Tensor randn(at::IntArrayRef sizes, at::Generator& gen, bool requires_grad = false) {
  return at::randn(sizes, gen, at::TensorOptions().dtype(at::kFloat)).requires_grad_(requires_grad);
}

// One function per thread, each with a different shape of graph: plain math, reductions,
// input mutation, output aliasing, inference (nothing requires grad).
std::vector<Case> cases() {
  std::vector<Case> c;
  c.push_back({"mlp", [](const TensorList& a) { return TensorList{at::relu(at::addmm(a[2], a[0], a[1])).sum(1)}; },
               [](at::Generator& g) {
                 return TensorList{randn({6, 8}, g), randn({8, 5}, g, true), randn({5}, g, true)};
               }});
  c.push_back({"sin_cos_chain", [](const TensorList& a) { return TensorList{(a[0].sin() * a[0].cos()).exp()}; },
               [](at::Generator& g) { return TensorList{randn({17}, g, true)}; }});
  c.push_back({"softmax_attention",
               [](const TensorList& a) {
                 at::Tensor scores = at::matmul(a[0], a[1].transpose(-2, -1)) / 2.0;
                 return TensorList{at::matmul(at::softmax(scores, -1), a[2])};
               },
               [](at::Generator& g) {
                 return TensorList{randn({2, 4, 3}, g, true), randn({2, 4, 3}, g, true), randn({2, 4, 3}, g, true)};
               }});
  c.push_back({"input_mutation",
               [](const TensorList& a) {
                 a[1].mul_(0.5).add_(a[0].detach().mean(0));
                 return TensorList{(a[0] * a[1]).tanh()};
               },
               [](at::Generator& g) {
                 return TensorList{randn({3, 4}, g, true), randn({4}, g)};
               }});
  c.push_back({"outputs_alias_input_and_intermediate",
               [](const TensorList& a) {
                 at::Tensor y = a[0] * 3;
                 return TensorList{a[0].view(-1), y.t(), y.sigmoid()};
               },
               [](at::Generator& g) {
                 return TensorList{randn({2, 5}, g, true)};
               }});
  c.push_back({"layer_norm_like",
               [](const TensorList& a) {
                 at::Tensor centered = a[0] - a[0].mean(-1, /*keepdim=*/true);
                 at::Tensor normed = centered / (centered.pow(2).mean(-1, true) + 1e-5).sqrt();
                 return TensorList{normed * a[1] + a[2]};
               },
               [](at::Generator& g) {
                 return TensorList{randn({4, 6}, g, true), randn({6}, g, true), randn({6}, g, true)};
               }});
  c.push_back({"inference_only",
               [](const TensorList& a) {
                 return TensorList{at::cumsum(a[0], 1), a[0].abs().max()};
               },
               [](at::Generator& g) {
                 return TensorList{randn({3, 7}, g)};
               }});
  c.push_back({"broadcast_and_reduce",
               [](const TensorList& a) { return TensorList{(a[0].unsqueeze(1) - a[1].unsqueeze(0)).pow(2).sum(-1)}; },
               [](at::Generator& g) {
                 return TensorList{randn({5, 3}, g, true), randn({4, 3}, g, true)};
               }});
  return c;
}

// The same inputs at every call: what expect_matches_eager needs to give eager and compiled
// equal copies.
std::function<TensorList()> seeded(const MakeInputs& make_inputs, uint64_t seed) {
  return [make_inputs, seed] {
    at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(seed);
    return make_inputs(gen);
  };
}

// Runs body(0..n-1) on n threads released together (so compiles overlap), and turns an
// exception escaping a thread into a test failure naming the thread.
void run_together(int n, const std::function<void(int)>& body) {
  std::latch start(n);
  std::vector<std::thread> threads;
  for (int t = 0; t < n; ++t) {
    threads.emplace_back([&, t] {
      start.arrive_and_wait();
      try {
        body(t);
      } catch (const std::exception& e) { ADD_FAILURE() << "thread " << t << ": " << e.what(); }
    });
  }
  for (auto& thread : threads) thread.join();
}

TEST(ConcurrentCompile, EachThreadCompilesAndRunsADifferentFunction) {
  const std::vector<Case> all = cases();
  ASSERT_EQ(all.size(), static_cast<std::size_t>(kThreads));
  run_together(kThreads, [&](int t) {
    const Case& c = all[t];
    AotConfig config;
    config.partition_fn =
        t % 2 ? partitioners::default_partition() : partitioners::min_cut_rematerialization_partition();
    config.compile_fw_bw_concurrently = t % 4 < 2;  // both ways of compiling the two graphs, side by side
    CompiledFunction compiled = aot_function(c.fn, config);
    testing::expect_matches_eager(c.fn, compiled, seeded(c.make_inputs, 100 + t), c.name);
    testing::expect_matches_eager(c.fn, compiled, seeded(c.make_inputs, 200 + t), c.name + " (second call)");
    EXPECT_EQ(compiled.num_compiled(), 1u) << c.name;
  });
}

// Where the forward and backward compilers run: on the compiling thread, one after the other, by
// default; on the pool when AotConfig::compile_fw_bw_concurrently is set. Either way the result
// is eager's.
TEST(ConcurrentCompile, ForwardAndBackwardCompileInlineUnlessAskedToRunConcurrently) {
  struct Where {
    std::mutex mutex;
    std::vector<std::pair<std::thread::id, bool>> calls;  // (thread, on a pool thread)
  };
  const Function fn = [](const TensorList& a) { return TensorList{(a[0].sin() * a[1]).sum(0)}; };
  const MakeInputs make_inputs = [](at::Generator& g) {
    return TensorList{randn({4, 3}, g, true), randn({3}, g, true)};
  };
  for (const bool concurrently : {false, true}) {
    auto where = std::make_shared<Where>();
    AotConfig config;
    config.compile_fw_bw_concurrently = concurrently;
    config.fw_compiler = [where](const Graph& graph, const std::vector<TensorMeta>& metas) {
      {
        std::lock_guard lock(where->mutex);
        where->calls.emplace_back(std::this_thread::get_id(), Scheduler::on_any_pool_thread());
      }
      return backends::interpreter()(graph, metas);
    };
    CompiledFunction compiled = aot_function(fn, config);
    const std::string mode = concurrently ? "concurrently" : "inline";
    testing::expect_matches_eager(fn, compiled, seeded(make_inputs, 600), mode);
    ASSERT_EQ(where->calls.size(), 2u) << mode << ": the forward and the backward compiler";
    for (const auto& [thread, on_pool] : where->calls) {
      EXPECT_EQ(on_pool, concurrently) << mode;
      if (!concurrently) EXPECT_EQ(thread, std::this_thread::get_id()) << mode;
    }
  }
}

TEST(ConcurrentCompile, ThreadsShareOneCompiledFunctionAcrossSignatures) {
  // Pairs of threads call with the same signature: a signature may be compiled by both at once
  // (the cache keeps one), and different signatures compile side by side.
  constexpr int kSignatures = kThreads / 2;
  const Function fn = [](const TensorList& a) { return TensorList{(a[0].sin() * a[1]).sum(0)}; };
  CompiledFunction compiled = aot_function(fn);
  run_together(kThreads, [&](int t) {
    const int64_t rows = 2 + t % kSignatures;
    const MakeInputs make_inputs = [rows](at::Generator& g) {
      return TensorList{randn({rows, 3}, g, true), randn({3}, g, true)};
    };
    testing::expect_matches_eager(fn, compiled, seeded(make_inputs, 300 + t), "rows=" + std::to_string(rows));
  });
  EXPECT_EQ(compiled.num_compiled(), static_cast<std::size_t>(kSignatures));
}

TEST(ConcurrentCompile, CompileBatchThenRunEveryFunctionOnItsOwnThread) {
  const std::vector<Case> all = cases();
  std::vector<CompileJob> jobs;
  for (std::size_t i = 0; i < all.size(); ++i)
    jobs.push_back({all[i].name, all[i].fn, seeded(all[i].make_inputs, 400 + i)(), {}});
  const std::vector<CompileResult> results = compile_batch(std::move(jobs));
  ASSERT_EQ(results.size(), all.size());
  for (const CompileResult& r : results) ASSERT_TRUE(r.ok()) << r.name << ": " << r.message;
  run_together(static_cast<int>(all.size()), [&](int t) {
    const RuntimeFn& runtime = results[t].output->runtime;
    testing::expect_matches_eager(
        all[t].fn, [&](const TensorList& a) { return runtime(a); }, seeded(all[t].make_inputs, 500 + t),
        all[t].name + " (compile_batch)");
  });
}

}  // namespace
}  // namespace aotpipe
