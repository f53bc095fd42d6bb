#include <aotpipe/cuda/capture_safety.h>
#include <aotpipe/cuda/cuda_graphs.h>
#include <aotpipe/cuda/internal/graph_runner.h>
#include <aotpipe/backend/backend_notes.h>
#include <aotpipe/backend/backend_registry.h>
#include <aotpipe/backend/backend_traits.h>
#include <aotpipe/backend/backends.h>

#include <fmt/format.h>

#include <memory>

namespace aotpipe::backends {

namespace {
std::string identity(const CudaGraphOptions& options) {
  // Bump the version when what a replay computes for a graph could change.
  return fmt::format("aotpipe.cuda_graphs/1 outputs={} static_parameters={} lend_saved_outputs={}",
                     options.outputs == CudaGraphOptions::Outputs::fresh ? "fresh" : "static_alias",
                     options.static_parameters, options.lend_saved_outputs);
}
// The forward and backward of one compiled function capture into one memory pool. Not with
// static outputs: a forward's replay could then overwrite the handed-out gradients of the last
// backward in the blocks the two share, which the liveness check (one graph's own) cannot see.
std::shared_ptr<cuda_detail::SharedCapture> shared_capture(const CudaGraphOptions& options) {
  CompileGroup* group = current_compile_group();
  if (!group || options.outputs != CudaGraphOptions::Outputs::fresh) return nullptr;
  return std::static_pointer_cast<cuda_detail::SharedCapture>(
      group->shared("aotpipe.cuda_graphs", [] { return std::make_shared<cuda_detail::SharedCapture>(); }));
}

// One graph: captured at its first call and replayed after (cuda_detail::GraphRunner), or, where a
// replay could compute something other than eager, the interpreter with a note saying why.
CompiledGraph compile_graph(const Graph& graph, const CudaGraphOptions& options) {
  auto interpreter = std::make_shared<const Interpreter>(graph, InterpreterOptions{.reinplace = true});
  if (std::optional<std::string> why = cuda_graph_refusal(graph)) {
    report_backend_note(fmt::format("cuda_graphs: graph '{}' runs in the interpreter: {}", graph.name(), *why));
    return [interpreter](TensorList args) { return interpreter->run(std::move(args)); };
  }
  // Lent outputs: the saved values, where the compile says which they are.
  const GraphOutputUse use = current_graph_output_use();
  std::optional<std::size_t> lent_from;
  if (options.lend_saved_outputs && options.outputs == CudaGraphOptions::Outputs::fresh)
    lent_from = use.saved_outputs_from;
  std::shared_ptr<cuda_detail::SharedCapture> shared = shared_capture(options);
  const bool is_backward = shared && !use.saved_outputs_from && !use.inference;
  if (is_backward) shared->backward_is_runner = true;
  auto runner = std::make_shared<cuda_detail::GraphRunner>(
      interpreter, graph.name(), options, unread_host_outputs(graph), lent_from, std::move(shared), is_backward);
  return [runner](TensorList args) { return (*runner)(std::move(args)); };
}
}  // namespace

Compiler cuda_graphs(CudaGraphOptions options) {
  // A replay launches every op's kernel, recomputed ones too: the default partitioner by default.
  return with_backend_traits(named_compiler(identity(options),
                                            [options](const Graph& graph, const std::vector<TensorMeta>&) {
                                              return compile_graph(graph, options);
                                            }),
                             {.recomputation_pays = false});
}

}  // namespace aotpipe::backends

// "cuda_graphs" by name (backend/backend_registry.h), wherever this library is linked (its
// CMake target forces this symbol into the link) or loaded (the CLI's CUDA plugin).
extern "C" {
extern const bool aotpipe_cuda_graphs_registered;
const bool aotpipe_cuda_graphs_registered =
    aotpipe::register_backend("cuda_graphs", [] { return aotpipe::backends::cuda_graphs(); });
}
