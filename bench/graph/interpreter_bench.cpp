// Interpreter overhead per node: a chain of 1,000 small pointwise ops run by the Interpreter
// against the same ATen calls made directly from C++ (unboxed, through the dispatcher).
// Report: (interpreter - direct) / 1000 = overhead per node; interpreter / direct = ratio.
#include <aotpipe/graph/graph.h>
#include <aotpipe/graph/interpreter.h>

#include <ATen/ATen.h>
#include <benchmark/benchmark.h>

namespace {

constexpr int kChainLength = 1000;

// The op of step i: sin, add(prev, x), mul(prev, 0.5) in turn — unary, binary, scalar.
int op_kind(int i) { return i % 3; }

aotpipe::Graph make_chain(int64_t numel) {
  aotpipe::Graph g("chain");
  auto meta = aotpipe::TensorMeta::contiguous({numel});
  aotpipe::Value* x = g.add_input("x", meta);
  aotpipe::Value* prev = x;
  for (int i = 0; i < kChainLength; ++i) {
    switch (op_kind(i)) {
      case 0: prev = g.add_call("aten::sin", {prev}, {{"", meta}})->output(); break;
      case 1: prev = g.add_call("aten::add.Tensor", {prev, x}, {{"", meta}})->output(); break;
      default: prev = g.add_call("aten::mul.Scalar", {prev, 0.5}, {{"", meta}})->output(); break;
    }
  }
  g.set_outputs({prev});
  return g;
}

at::Tensor run_direct(const at::Tensor& x) {
  at::Tensor prev = x;
  for (int i = 0; i < kChainLength; ++i) {
    switch (op_kind(i)) {
      case 0: prev = at::sin(prev); break;
      case 1: prev = at::add(prev, x); break;
      default: prev = at::mul(prev, 0.5); break;
    }
  }
  return prev;
}

void BM_DirectAten(benchmark::State& state) {
  at::Tensor x = at::randn({state.range(0)});
  for (auto _ : state) benchmark::DoNotOptimize(run_direct(x));
  state.counters["ns_per_op"] =
      benchmark::Counter(static_cast<double>(kChainLength) * static_cast<double>(state.iterations()),
                         benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}

void BM_Interpreter(benchmark::State& state) {
  aotpipe::Graph g = make_chain(state.range(0));
  aotpipe::Interpreter interp(g);
  at::Tensor x = at::randn({state.range(0)});
  // Same result as the direct calls (guards the comparison itself).
  if (!at::allclose(interp.run({x})[0], run_direct(x))) state.SkipWithError("interpreter and direct results differ");
  for (auto _ : state) benchmark::DoNotOptimize(interp.run({x}));
  state.counters["ns_per_op"] =
      benchmark::Counter(static_cast<double>(kChainLength) * static_cast<double>(state.iterations()),
                         benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}

void BM_InterpreterBuild(benchmark::State& state) {
  aotpipe::Graph g = make_chain(state.range(0));
  for (auto _ : state) benchmark::DoNotOptimize(aotpipe::Interpreter(g));
}

BENCHMARK(BM_DirectAten)->Arg(1)->Arg(64)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_Interpreter)->Arg(1)->Arg(64)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_InterpreterBuild)->Arg(1)->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
