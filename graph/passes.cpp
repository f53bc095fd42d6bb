#include <aotpipe/graph/passes.h>

#include <fmt/format.h>

#include <unordered_map>
#include <unordered_set>

namespace aotpipe {

std::size_t eliminate_dead_code(Graph& graph) {
  // One backward sweep: a node is live if it has side effects or defines a live value.
  std::vector<char> live(graph.value_id_limit(), 0);  // by Value::id
  for (const Value* v : graph.outputs()) live[v->id()] = 1;
  std::vector<Node*> dead;
  auto nodes = graph.nodes();
  for (std::size_t i = nodes.size(); i-- > 0;) {
    Node* node = nodes[i];
    bool is_live = node->has_side_effects();
    for (Value* v : node->outputs()) is_live = is_live || live[v->id()];
    if (!is_live) {
      dead.push_back(node);
      continue;
    }
    node->for_each_input([&](Value* v) { live[v->id()] = 1; });
  }
  graph.erase_nodes(dead);
  return dead.size();
}

Graph extract_subgraph(const Graph& graph, std::span<Value* const> inputs, std::span<Value* const> outputs,
                       std::string name) {
  Graph sub(std::move(name));
  std::unordered_map<const Value*, Value*> map;
  for (Value* in : inputs) {
    if (in->graph() != &graph)
      throw GraphError(fmt::format("extract_subgraph: %{} is not a value of graph '{}'", in->name(), graph.name()));
    map[in] = sub.add_input(in->name(), in->type(), in->meta() ? std::optional(*in->meta()) : std::nullopt);
  }
  // Which nodes are needed: walk back from the outputs, stopping at the given inputs.
  std::unordered_set<const Node*> needed;
  std::vector<const Value*> work(outputs.begin(), outputs.end());
  while (!work.empty()) {
    const Value* v = work.back();
    work.pop_back();
    if (map.count(v)) continue;
    if (v->is_input())
      throw GraphError(fmt::format(
          "extract_subgraph '{}': the outputs depend on %{}, an input of '{}' not among the subgraph's inputs",
          sub.name(), v->name(), graph.name()));
    if (!needed.insert(v->producer()).second) continue;
    v->producer()->for_each_input([&](Value* used) { work.push_back(used); });
  }
  for (const Node* node : graph.nodes()) {
    if (!needed.count(node)) continue;
    // A node whose values were all given as inputs is cut off above; the rest are copied.
    bool all_given = true;
    for (Value* v : node->outputs()) all_given = all_given && map.count(v);
    if (all_given) continue;
    copy_node(sub, graph, *node, map);
  }
  std::vector<Value*> results;
  for (Value* out : outputs) results.push_back(map.at(out));
  sub.set_outputs(std::move(results));
  return sub;
}

void copy_node(Graph& target, const Graph& source, const Node& node, std::unordered_map<const Value*, Value*>& map) {
  if (!node.is_call()) {
    Value* v = node.output();
    if (map.count(v)) return;
    map[v] = target.add_constant_ref(node.constant_name(), *v->meta(), v->name());
    auto it = source.tensor_constants().find(node.constant_name());
    if (it != source.tensor_constants().end()) target.bind_constant(it->first, it->second);
    target.nodes().back()->attrs() = node.attrs();
    return;
  }
  std::vector<Argument> args = node.args();
  for (Argument& arg : args) arg.remap_values([&](Value* used) { return map.at(used); });
  std::vector<OutputSpec> specs;
  specs.reserve(node.num_outputs());
  for (Value* out : node.outputs()) {
    // A result given as an input keeps its name there; this copy's result gets a fresh one.
    std::string out_name = target.find_value(out->name()) ? std::string() : out->name();
    specs.push_back({std::move(out_name), out->meta() ? std::optional(*out->meta()) : std::nullopt, out->type()});
  }
  Node* copy = target.add_call(node.op(), std::move(args), std::move(specs));
  copy->attrs() = node.attrs();
  for (std::size_t i = 0; i < node.num_outputs(); ++i) map.try_emplace(node.output(i), copy->output(i));
}

}  // namespace aotpipe
