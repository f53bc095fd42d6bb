#include <aotpipe/graph/interpreter.h>
#include <aotpipe/stages/compile/backends.h>

#include <memory>

namespace aotpipe::backends {

Compiler interpreter() {
  // Bump the version when the interpreter's results for a graph could change.
  return named_compiler("aotpipe.interpreter/1",
                        [](const Graph& graph, const std::vector<TensorMeta>&) -> CompiledGraph {
                          auto program = std::make_shared<const Interpreter>(graph);
                          return [program](TensorList args) { return program->run(std::move(args)); };
                        });
}

}  // namespace aotpipe::backends
