// The backward of a 1x1 convolution run by the Interpreter as ATen's convolution_backward against
// the matrix products graph/convolution_lowering.h puts in its place, on shapes from the zoo's
// convolutional nets (batch 2) and beyond, on either side of the cost rule: the products are used
// where N*Ho*Wo*(C+O) <= C*O ("weight_bound" = 1 in the report). Interleave the two:
//   convolution_lowering_bench --benchmark_enable_random_interleaving=true --benchmark_repetitions=5
//     --benchmark_report_aggregates_only=true
// Report: lowered median / kernel median per shape.
#include <aotpipe/graph/convolution_lowering.h>
#include <aotpipe/graph/graph.h>
#include <aotpipe/graph/interpreter.h>

#include <ATen/ATen.h>
#include <benchmark/benchmark.h>

#include <vector>

namespace {

using aotpipe::TensorMeta;

// Args: N, C, H (= W), O, stride. Input grad and weight grad, no bias (as in a conv before a norm).
aotpipe::Graph conv_backward(const benchmark::State& state) {
  const int64_t n = state.range(0), c = state.range(1), h = state.range(2), o = state.range(3), s = state.range(4);
  const int64_t ho = (h - 1) / s + 1;
  aotpipe::Graph g("conv_backward");
  aotpipe::Value* go = g.add_input("go", TensorMeta::contiguous({n, o, ho, ho}));
  aotpipe::Value* x = g.add_input("x", TensorMeta::contiguous({n, c, h, h}));
  aotpipe::Value* w = g.add_input("w", TensorMeta::contiguous({o, c, 1, 1}));
  aotpipe::Node* call = g.add_call(
      "aten::convolution_backward",
      {go, x, w, std::vector<int64_t>{0}, std::vector<int64_t>{s, s}, std::vector<int64_t>{0, 0},
       std::vector<int64_t>{1, 1}, false, std::vector<int64_t>{0, 0}, 1,
       c10::IValue(std::vector<bool>{true, true, false})},
      {{"gi", TensorMeta::contiguous({n, c, h, h})}, {"gw", TensorMeta::contiguous({o, c, 1, 1})}, {"gb", {}}});
  g.set_outputs({call->output(0), call->output(1)});
  return g;
}

std::vector<at::Tensor> inputs_of(const aotpipe::Graph& g) {
  std::vector<at::Tensor> inputs;
  for (const aotpipe::Value* v : g.inputs()) inputs.push_back(at::randn(v->meta()->sizes));
  return inputs;
}

void run(benchmark::State& state, bool lowered) {
  aotpipe::Graph g = conv_backward(state);
  const std::vector<at::Tensor> inputs = inputs_of(g);
  const aotpipe::Interpreter kernel(g);
  const bool weight_bound = !aotpipe::lowerable_convolution_backwards(g).empty();
  if (lowered && aotpipe::lower_convolution_backward(g, {.only_where_faster = false}) != 1) {
    state.SkipWithError("the call was not lowered");
    return;
  }
  const aotpipe::Interpreter interp(g);
  // Same gradients as the kernel (guards the comparison itself).
  const std::vector<at::Tensor> want = kernel.run(inputs), got = interp.run(inputs);
  for (std::size_t i = 0; i < want.size(); ++i)
    if (!at::allclose(got[i], want[i], 1e-3, 1e-3)) state.SkipWithError("lowered gradients differ");
  for (auto _ : state) benchmark::DoNotOptimize(interp.run(inputs));
  state.counters["weight_bound"] = weight_bound ? 1 : 0;
}

void BM_ConvolutionKernel(benchmark::State& state) { run(state, false); }
void BM_Lowered(benchmark::State& state) { run(state, true); }

void shapes(benchmark::internal::Benchmark* b) {
  b->ArgNames({"N", "C", "H", "O", "s"});
  for (const auto& args : std::vector<std::vector<int64_t>>{{2, 1024, 4, 2048, 2},  // ResNeXt's last downsample
                                                            {2, 256, 2, 2048, 1},
                                                            {2, 1024, 4, 256, 1},
                                                            {2, 512, 8, 1024, 2},
                                                            {2, 128, 4, 1024, 1},
                                                            {2, 256, 16, 512, 2},
                                                            {2, 512, 8, 128, 1},  // the rule's edge
                                                            {2, 64, 16, 256, 1},
                                                            {2, 256, 16, 64, 1},
                                                            {8, 256, 16, 64, 1},
                                                            {2, 16, 32, 96, 1},
                                                            {8, 1024, 8, 2048, 2}})
    b->Args(args);
  b->Unit(benchmark::kMicrosecond);
}

BENCHMARK(BM_ConvolutionKernel)->Apply(shapes);
BENCHMARK(BM_Lowered)->Apply(shapes);

}  // namespace

BENCHMARK_MAIN();
