#include <aotpipe/backend/backend_notes.h>
#include <aotpipe/backend/backends.h>
#include <aotpipe/graph/interpreter.h>
#include <aotpipe/pipeline/identified.h>

#include <memory>

namespace aotpipe {

Compiler named_compiler(std::string identity, Compiler compiler) {
  using Signature = CompiledGraph(const Graph&, const std::vector<TensorMeta>&);
  return Identified<Signature>{std::move(identity), std::move(compiler)};
}

namespace backends {

namespace {
// The interpreter with `options`, folding constant subgraphs in inference graphs: computed once,
// their results are kept for the graph's lifetime, where a training step's memory is measured
// against eager's (docs/memory.md).
Compiler interpreter_with(std::string identity, InterpreterOptions options) {
  return named_compiler(std::move(identity),
                        [options](const Graph& graph, const std::vector<TensorMeta>&) -> CompiledGraph {
                          InterpreterOptions for_graph = options;
                          for_graph.fold_constants = current_graph_output_use().inference;
                          auto program = std::make_shared<const Interpreter>(graph, for_graph);
                          return [program](TensorList args) { return program->run(std::move(args)); };
                        });
}
}  // namespace

// Bump a version when that backend's results for a graph could change.
Compiler interpreter() { return interpreter_with("aotpipe.interpreter/1", {.reinplace = true}); }

Compiler planned_interpreter() {
  return interpreter_with("aotpipe.planned/1", {.reinplace = true, .plan_memory = true});
}

}  // namespace backends
}  // namespace aotpipe
