// aotpipe's end-to-end compile and per-call costs, the C++ half of compile_vs_python.py (which
// runs this program and PyTorch's functorch.compile.aot_function on the same programs and prints
// one table; docs/benchmarks.md has the numbers).
//   BM_Compile/<ops>:           aotpipe::compile (default pipeline: metadata, dedupe, synthetic
//                               base, joint trace, min-cut partition, interpreter backend) of the
//                               synthetic program (synthetic_program.h);
//   BM_EagerCall/<rg>:          the tiny function x.sin() on a 1-element tensor, called eagerly;
//   BM_CompiledCall/<rg>:       the same through a CompiledFunction (compiled before timing);
//   rg = 1: the input requires grad (the call goes through the autograd Function).
// Run: build/bench/runtime/aot_compile_bench --benchmark_filter=BM_Compile
#include "synthetic_program.h"

#include <aotpipe/driver/aot_function.h>
#include <aotpipe/stages/partition/min_cut_partition.h>

#include <ATen/ATen.h>
#include <benchmark/benchmark.h>

namespace {

using aotpipe::TensorList;

void BM_Compile(benchmark::State& state) {
  const int num_ops = static_cast<int>(state.range(0));
  const aotpipe::Function program = aotpipe::bench::synthetic_program(num_ops);
  const TensorList inputs = aotpipe::bench::synthetic_inputs();
  aotpipe::AotConfig config;
  config.partition_fn = aotpipe::partitioners::min_cut_rematerialization_partition();
  std::size_t forward_nodes = 0, backward_nodes = 0;
  for (auto _ : state) {
    aotpipe::CompileOutput out = aotpipe::compile("bench", program, inputs, config);
    forward_nodes = out.state()->partition->forward.num_nodes();
    backward_nodes = out.state()->partition->backward.num_nodes();
  }
  state.counters["ops"] = num_ops;
  state.counters["fw_nodes"] = static_cast<double>(forward_nodes);
  state.counters["bw_nodes"] = static_cast<double>(backward_nodes);
}
BENCHMARK(BM_Compile)->ArgName("ops")->Arg(10)->Arg(100)->Arg(500)->Arg(1000)->Arg(2000)->Unit(benchmark::kMillisecond);

TensorList tiny_sin(const TensorList& a) { return {a[0].sin()}; }
TensorList tiny_input(bool requires_grad) { return {at::randn({1}).requires_grad_(requires_grad)}; }

void BM_EagerCall(benchmark::State& state) {
  const aotpipe::Function fn = tiny_sin;
  const TensorList args = tiny_input(state.range(0) != 0);
  for (auto _ : state) benchmark::DoNotOptimize(fn(args));
}
BENCHMARK(BM_EagerCall)->ArgName("requires_grad")->Arg(0)->Arg(1)->Unit(benchmark::kMicrosecond);

void BM_CompiledCall(benchmark::State& state) {
  const aotpipe::CompiledFunction compiled = aotpipe::aot_function(tiny_sin);
  const TensorList args = tiny_input(state.range(0) != 0);
  compiled(args);  // compile outside the timing
  for (auto _ : state) benchmark::DoNotOptimize(compiled(args));
}
BENCHMARK(BM_CompiledCall)->ArgName("requires_grad")->Arg(0)->Arg(1)->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
