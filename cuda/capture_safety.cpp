#include <aotpipe/cuda/capture_safety.h>
#include <aotpipe/graph/op_properties.h>

#include <fmt/format.h>

#include <algorithm>
#include <unordered_set>

namespace aotpipe {

namespace {

bool is_cpu_scalar(const TensorMeta& meta) { return meta.device.is_cpu() && meta.sizes.empty(); }

std::optional<std::string> input_refusal(const Graph& graph) {
  for (std::size_t i = 0; i < graph.num_inputs(); ++i) {
    const Value* input = graph.input(i);
    const TensorMeta* meta = input->meta();
    if (!input->is_tensor() || !meta || meta->device.is_cuda() || is_cpu_scalar(*meta)) continue;
    return fmt::format(
        "input {} (%{}) is on {}; a CUDA graph reads device memory only (0-dim CPU scalars are copied in)", i,
        input->name(), meta->device.str());
  }
  return std::nullopt;
}

// The argument positions `node` writes into (its schema's mutable arguments).
std::optional<std::size_t> written_input(const Node& node, const std::unordered_set<const Value*>& inputs) {
  const auto& schema_args = node.schema().arguments();
  for (std::size_t a = 0; a < node.args().size() && a < schema_args.size(); ++a) {
    const auto* alias = schema_args[a].alias_info();
    if (!alias || !alias->isWrite() || !node.args()[a].is_value()) continue;
    if (inputs.count(node.args()[a].value())) return a;
  }
  return std::nullopt;
}

// A view op (every result aliases an argument without writing it) launches no kernel.
bool is_view(const Node& node) {
  const auto& returns = node.schema().returns();
  return !returns.empty() && std::all_of(returns.begin(), returns.end(), [](const c10::Argument& r) {
    return r.alias_info() && !r.alias_info()->isWrite();
  });
}

std::optional<std::string> node_refusal(const Graph& graph) {
  const std::unordered_set<const Value*> inputs(graph.inputs().begin(), graph.inputs().end());
  bool launches_kernels = false;
  for (const Node* node : graph.nodes()) {
    launches_kernels = launches_kernels || (node->is_call() && !is_view(*node));
    if (!node->is_call()) {  // a tensor constant: a 0-dim CPU one is a scalar, fixed at capture as it should be
      const TensorMeta* meta = node->output()->meta();
      if (meta && !meta->device.is_cuda() && !is_cpu_scalar(*meta))
        return fmt::format("tensor constant %{} is on {}", node->output()->name(), meta->device.str());
      continue;
    }
    if (has_data_dependent_output(node->op()))
      return fmt::format("{} has a data-dependent output (it reads tensor data on the host: a sync)",
                         node->qualified_name());
    if (node->has_side_effects()) {
      if (auto a = written_input(*node, inputs))
        return fmt::format("{} writes into graph input %{} (argument '{}'); a replay would write into its static copy",
                           node->qualified_name(), node->args()[*a].value()->name(),
                           node->schema().arguments()[*a].name());
    }
    for (const Value* out : node->outputs()) {
      const TensorMeta* meta = out->meta();
      if (!out->is_tensor() || !meta || meta->device.is_cuda()) continue;
      return fmt::format("{} makes %{} on {}; its kernel would run on the host once, at capture",
                         node->qualified_name(), out->name(), meta->device.str());
    }
  }
  if (!launches_kernels) return "it launches no kernel (its results are views of its inputs): nothing to replay";
  return std::nullopt;
}

// The positions of an op's results that are its RNG state (philox seed and offset), made on the
// host when it draws nothing, and the position of its dropout argument.
struct HostRngState {
  std::string_view op;
  std::size_t first_result, last_result, dropout_arg;
};
constexpr HostRngState kHostRngState[] = {
    {"aten::_scaled_dot_product_efficient_attention", 2, 3, 5},
};

}  // namespace

std::vector<bool> unread_host_outputs(const Graph& graph) {
  std::vector<bool> unread(graph.num_outputs(), false);
  for (std::size_t k = 0; k < graph.num_outputs(); ++k) {
    const Value* out = graph.outputs()[k];
    const Node* node = out->producer();
    if (!node || !node->is_call()) continue;
    for (const HostRngState& rng : kHostRngState) {
      if (node->qualified_name() != rng.op || out->output_index() < rng.first_result ||
          out->output_index() > rng.last_result || node->args().size() <= rng.dropout_arg)
        continue;
      const Argument& dropout = node->args()[rng.dropout_arg];
      unread[k] = dropout.is_constant() && dropout.constant().isDouble() && dropout.constant().toDouble() == 0.0;
    }
  }
  return unread;
}

std::optional<std::string> cuda_graph_refusal(const Graph& graph) {
  if (auto why = input_refusal(graph)) return why;
  return node_refusal(graph);
}

}  // namespace aotpipe
