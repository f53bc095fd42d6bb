#include <aotpipe/cuda/capture_safety.h>
#include <aotpipe/cuda/cuda_graphs.h>
#include <aotpipe/cuda/internal/graph_runner.h>
#include <aotpipe/stages/compile/backend_notes.h>
#include <aotpipe/stages/compile_state.h>

#include <fmt/format.h>

#include <memory>

namespace aotpipe::backends {

namespace {
std::string identity(const CudaGraphOptions& options) {
  // Bump the version when what a replay computes for a graph could change.
  return fmt::format("aotpipe.cuda_graphs/1 outputs={} static_parameters={}",
                     options.outputs == CudaGraphOptions::Outputs::fresh ? "fresh" : "static_alias",
                     options.static_parameters);
}
}  // namespace

Compiler cuda_graphs(CudaGraphOptions options) {
  return named_compiler(
      identity(options), [options](const Graph& graph, const std::vector<TensorMeta>&) -> CompiledGraph {
        auto interpreter = std::make_shared<const Interpreter>(graph);
        if (std::optional<std::string> why = cuda_graph_refusal(graph)) {
          report_backend_note(fmt::format("cuda_graphs: graph '{}' runs in the interpreter: {}", graph.name(), *why));
          return [interpreter](TensorList args) { return interpreter->run(std::move(args)); };
        }
        auto runner =
            std::make_shared<cuda_detail::GraphRunner>(interpreter, graph.name(), options, unread_host_outputs(graph));
        return [runner](TensorList args) { return (*runner)(std::move(args)); };
      });
}

}  // namespace aotpipe::backends
