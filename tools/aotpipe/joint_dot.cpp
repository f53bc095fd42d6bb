#include "aotpipe/joint_dot.h"

#include <fmt/format.h>

#include <unordered_map>
#include <unordered_set>

namespace aotpipe::cli {
namespace {

std::unordered_set<std::string> defined_by_calls(const Graph& graph) {
  std::unordered_set<std::string> names;
  for (const Node* n : graph.nodes())
    for (const Value* v : n->outputs()) names.insert(v->name());
  return names;
}

std::string escape(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out;
}

template <typename... Args>
void emit(fmt::memory_buffer& out, fmt::format_string<Args...> format, Args&&... args) {
  fmt::format_to(std::back_inserter(out), format, std::forward<Args>(args)...);
}

}  // namespace

std::string joint_graph_dot(const JointGraph& joint, const PartitionResult& partition) {
  const std::unordered_set<std::string> in_forward = defined_by_calls(partition.forward);
  const std::unordered_set<std::string> in_backward = defined_by_calls(partition.backward);
  const std::unordered_set<std::string> saved(partition.saved_values.begin(), partition.saved_values.end());

  fmt::memory_buffer out;
  emit(out,
       "digraph \"{}\" {{\n  rankdir=TB;\n  node [shape=box, style=filled, fontname=\"monospace\", fontsize=10];\n",
       escape(joint.graph.name()));
  emit(out,
       "  label=\"{}: blue = forward, orange = backward, green = recomputed in the backward, "
       "red border = saved for the backward (the cut)\";\n  labelloc=t;\n",
       escape(joint.graph.name()));

  // Each value is drawn as the node that defines it; inputs are ellipses.
  std::unordered_map<const Value*, std::string> id;
  for (std::size_t i = 0; i < joint.graph.num_inputs(); ++i) {
    const Value* in = joint.graph.input(i);
    const bool primal = i < joint.num_primals;
    id[in] = fmt::format("in{}", i);
    emit(out, "  in{} [shape=ellipse, fillcolor=\"{}\", label=\"%{}\"{}];\n", i, primal ? "#cfe2f3" : "#fce5cd",
         escape(in->name()), saved.count(in->name()) ? ", color=red, penwidth=3" : "");
  }
  std::size_t index = 0;
  for (const Node* n : joint.graph.nodes()) {
    const std::string node_id = fmt::format("n{}", index++);
    bool forward = false, backward = false, is_saved = false;
    for (const Value* v : n->outputs()) {
      id[v] = node_id;
      forward = forward || in_forward.count(v->name());
      backward = backward || in_backward.count(v->name());
      is_saved = is_saved || saved.count(v->name());
    }
    const char* fill = forward && backward ? "#b6d7a8" : forward ? "#cfe2f3" : backward ? "#f9cb9c" : "#eeeeee";
    emit(out, "  {} [fillcolor=\"{}\", label=\"{}\"{}];\n", node_id, fill, escape(n->label()),
         is_saved ? ", color=red, penwidth=3" : "");
  }
  index = 0;
  for (const Node* n : joint.graph.nodes()) {
    const std::string node_id = fmt::format("n{}", index++);
    const bool consumer_in_backward = [&] {
      for (const Value* v : n->outputs())
        if (in_backward.count(v->name())) return true;
      return false;
    }();
    std::unordered_set<std::string> drawn;
    for (const Value* v : n->inputs()) {
      auto it = id.find(v);
      if (it == id.end() || !drawn.insert(it->second).second) continue;
      const bool cut = consumer_in_backward && saved.count(v->name());
      emit(out, "  {} -> {}{};\n", it->second, node_id, cut ? " [color=red, penwidth=2]" : "");
    }
  }
  for (std::size_t i = 0; i < joint.graph.num_outputs(); ++i) {
    const Value* v = joint.graph.outputs()[i];
    const bool fwd = i < joint.num_fwd_outputs;
    emit(out, "  out{} [shape=ellipse, fillcolor=\"{}\", label=\"{} {}\"];\n", i, fwd ? "#cfe2f3" : "#f9cb9c",
         fwd ? "output" : "gradient", fwd ? i : i - joint.num_fwd_outputs);
    if (auto it = id.find(v); it != id.end()) emit(out, "  {} -> out{};\n", it->second, i);
  }
  emit(out, "}}\n");
  return fmt::to_string(out);
}

}  // namespace aotpipe::cli
