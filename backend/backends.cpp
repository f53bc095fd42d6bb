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

Compiler interpreter() {
  // Bump the version when the interpreter's results for a graph could change.
  return named_compiler(
      "aotpipe.interpreter/1", [](const Graph& graph, const std::vector<TensorMeta>&) -> CompiledGraph {
        auto program = std::make_shared<const Interpreter>(graph, InterpreterOptions{.reinplace = true});
        return [program](TensorList args) { return program->run(std::move(args)); };
      });
}

}  // namespace backends
}  // namespace aotpipe
