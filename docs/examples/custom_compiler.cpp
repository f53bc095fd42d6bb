// A custom backend compiler: it wraps aotpipe's interpreter, prints every graph it is given and
// counts how often the compiled graphs run.
#include <aotpipe/aotpipe.h>

#include <ATen/ATen.h>

#include <atomic>
#include <iostream>
#include <memory>

int main() {
  auto graphs_compiled = std::make_shared<std::atomic<int>>(0);
  auto graph_runs = std::make_shared<std::atomic<int>>(0);
  aotpipe::Compiler counting_interpreter = [=](const aotpipe::Graph& graph,
                                               const std::vector<aotpipe::TensorMeta>& input_metas) {
    ++*graphs_compiled;
    std::cout << graph;  // a functional ATen graph: every call shows its overload, e.g. aten::mul.Tensor
    aotpipe::CompiledGraph run = aotpipe::backends::interpreter()(graph, input_metas);
    return aotpipe::CompiledGraph([run, graph_runs](aotpipe::TensorList args) {
      ++*graph_runs;
      return run(std::move(args));  // by value: the graph may free its inputs early
    });
  };

  aotpipe::AotConfig config;
  config.fw_compiler = counting_interpreter;  // bw_compiler and inference_compiler default to it
  aotpipe::Function fn = [](const aotpipe::TensorList& a) { return aotpipe::TensorList{a[0].sin() * a[1]}; };
  aotpipe::CompiledFunction compiled = aotpipe::aot_function(fn, config);

  at::Tensor x = at::randn({3}).requires_grad_(true);
  at::Tensor y = at::randn({3});
  bool same = true;
  for (int step = 0; step < 2; ++step) {  // the second step reuses the compile
    x.mutable_grad() = at::Tensor();
    at::Tensor out = compiled({x, y})[0];
    out.sum().backward();
    same = same && at::allclose(out, x.sin() * y) && at::allclose(x.grad(), x.cos() * y);  // eager
  }
  // One forward and one backward graph compiled; each ran once per step.
  same = same && *graphs_compiled == 2 && *graph_runs == 4;
  std::cout << *graphs_compiled << " graphs compiled, " << *graph_runs << " graph runs: "
            << (same ? "matches eager" : "DIFFERS from eager or from the expected counts") << "\n";
  return same ? 0 : 1;
}
