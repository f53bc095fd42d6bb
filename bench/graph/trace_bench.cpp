// Trace cost per op: the tracer in fake mode on a 1,000-op program, against running the same
// ops on meta tensors without recording (the floor: dispatch + meta kernels). Compare with
// bench/make_fx_bench.py (make_fx on the same program). Numbers in docs/tracer.md.
#include <aotpipe/tracer/tracer.h>

#include <ATen/ATen.h>
#include <benchmark/benchmark.h>

namespace {

constexpr int kOps = 1000;  // 4 ops per step

aotpipe::TensorList program(const aotpipe::TensorList& a) {
  at::Tensor x = a[0];
  const at::Tensor& y = a[1];
  for (int i = 0; i < kOps / 4; ++i) {
    x = x * y;    // aten::mul.Tensor
    x = x + 1.0;  // aten::add.Scalar
    x = x.sin();  // aten::sin
    x = x.t();    // aten::t (a view)
  }
  return {x};
}

aotpipe::TensorList inputs() { return {at::randn({64, 64}), at::randn({64, 64})}; }

void BM_TraceFake(benchmark::State& state) {
  auto in = inputs();
  aotpipe::TraceOptions options;
  options.functionalize = state.range(0) != 0;
  std::size_t nodes = 0;
  for (auto _ : state) {
    aotpipe::Graph g = aotpipe::trace(program, in, options);
    nodes = g.num_nodes();
    benchmark::DoNotOptimize(nodes);
  }
  state.counters["nodes"] = static_cast<double>(nodes);
  state.counters["per_op_us"] =
      benchmark::Counter(kOps, benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
}
BENCHMARK(BM_TraceFake)->Arg(0)->Arg(1)->ArgName("functionalize")->Unit(benchmark::kMillisecond);

void BM_MetaEagerNoRecording(benchmark::State& state) {
  aotpipe::TensorList in{at::empty({64, 64}, at::kMeta), at::empty({64, 64}, at::kMeta)};
  for (auto _ : state) benchmark::DoNotOptimize(program(in));
  state.counters["per_op_us"] =
      benchmark::Counter(kOps, benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
}
BENCHMARK(BM_MetaEagerNoRecording)->Unit(benchmark::kMillisecond);

void BM_TraceReal(benchmark::State& state) {
  auto in = inputs();
  aotpipe::TraceOptions options;
  options.mode = aotpipe::TraceMode::Real;
  for (auto _ : state) benchmark::DoNotOptimize(aotpipe::trace(program, in, options).num_nodes());
  state.counters["per_op_us"] =
      benchmark::Counter(kOps, benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
}
BENCHMARK(BM_TraceReal)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
