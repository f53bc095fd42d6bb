#include <aotpipe/backend/backend_notes.h>
#include <aotpipe/backend/backends.h>
#include <aotpipe/graph/convolution_lowering.h>
#include <aotpipe/graph/interpreter.h>
#include <aotpipe/pipeline/identified.h>

#include <fmt/format.h>

#include <memory>

namespace aotpipe {

Compiler named_compiler(std::string identity, Compiler compiler) {
  using Signature = CompiledGraph(const Graph&, const std::vector<TensorMeta>&);
  return Identified<Signature>{std::move(identity), std::move(compiler)};
}

namespace backends {

namespace {
// The graph the interpreter runs: 1x1 convolution backwards whose weight dominates become matrix
// products on the CPU (graph/convolution_lowering.h); the graph itself where there are none.
std::shared_ptr<const Interpreter> interpret(const Graph& graph, const InterpreterOptions& options) {
  if (lowerable_convolution_backwards(graph).empty()) return std::make_shared<const Interpreter>(graph, options);
  Graph lowered = graph;
  const std::size_t count = lower_convolution_backward(lowered);
  report_backend_note(
      fmt::format("graph '{}': {} convolution_backward call{} of a 1x1 kernel run{} as mm "
                  "(its weight outweighs its activations)",
                  graph.name(), count, count == 1 ? "" : "s", count == 1 ? "s" : ""));
  return std::make_shared<const Interpreter>(lowered, options);
}

// The interpreter with `options`, folding constant subgraphs in inference graphs: computed once,
// their results are kept for the graph's lifetime, where a training step's memory is measured
// against eager's (docs/memory.md).
Compiler interpreter_with(std::string identity, InterpreterOptions options) {
  return named_compiler(std::move(identity),
                        [options](const Graph& graph, const std::vector<TensorMeta>&) -> CompiledGraph {
                          InterpreterOptions for_graph = options;
                          for_graph.fold_constants = current_graph_output_use().inference;
                          std::shared_ptr<const Interpreter> program = interpret(graph, for_graph);
                          return [program](TensorList args) { return program->run(std::move(args)); };
                        });
}
}  // namespace

// Bump a version when that backend's results for a graph could change.
Compiler interpreter() { return interpreter_with("aotpipe.interpreter/2", {.reinplace = true}); }

Compiler planned_interpreter() {
  return interpreter_with("aotpipe.planned/2", {.reinplace = true, .plan_memory = true});
}

}  // namespace backends
}  // namespace aotpipe
