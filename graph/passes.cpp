#include <aotpipe/graph/passes.h>

#include <fmt/format.h>

#include <stdexcept>
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
    bool is_live = false;
    for (Value* v : node->outputs()) is_live = is_live || live[v->id()];
    if (!is_live && !node->has_side_effects()) {  // the schema is read only for an unused node
      dead.push_back(node);
      continue;
    }
    node->for_each_input([&](Value* v) { live[v->id()] = 1; });
  }
  graph.erase_nodes(dead);
  return dead.size();
}

std::size_t drop_unread_arguments(Graph& graph) {
  // native_batch_norm_backward(grad_out, input, weight, running_mean, running_var, save_mean,
  //                            save_invstd, train, eps, output_mask)
  constexpr std::size_t kRunningMean = 3, kRunningVar = 4, kTrain = 7;
  std::size_t dropped = 0;
  for (Node* node : graph.nodes()) {
    if (!node->is_call() || node->qualified_name() != "aten::native_batch_norm_backward") continue;
    auto& args = node->args();
    if (args.size() <= kTrain || !args[kTrain].is_constant() || !args[kTrain].constant().isBool() ||
        !args[kTrain].constant().toBool())
      continue;
    for (std::size_t k : {kRunningMean, kRunningVar}) {
      if (!args[k].is_value()) continue;
      args[k] = Argument::none();
      ++dropped;
    }
  }
  return dropped;
}

Graph extract_subgraph(const Graph& graph, std::span<Value* const> inputs, std::span<Value* const> outputs,
                       std::string name) {
  Graph sub(std::move(name));
  ValueMap map(graph);
  for (Value* in : inputs) {
    if (in->graph() != &graph)
      throw GraphError(fmt::format("extract_subgraph: %{} is not a value of graph '{}'", in->name(), graph.name()));
    map.set(in, sub.add_input(in->name(), in->type(), in->meta() ? std::optional(*in->meta()) : std::nullopt));
  }
  // Which nodes are needed: walk back from the outputs, stopping at the given inputs.
  std::vector<char> needed(graph.node_id_limit(), 0);  // by Node::id
  std::vector<const Value*> work(outputs.begin(), outputs.end());
  for (const Value* v : outputs)
    if (v->graph() != &graph)
      throw GraphError(fmt::format("extract_subgraph: %{} is not a value of graph '{}'", v->name(), graph.name()));
  while (!work.empty()) {
    const Value* v = work.back();
    work.pop_back();
    if (map.contains(v)) continue;
    if (v->is_input())
      throw GraphError(fmt::format(
          "extract_subgraph '{}': the outputs depend on %{}, an input of '{}' not among the subgraph's inputs",
          sub.name(), v->name(), graph.name()));
    if (needed[v->producer()->id()]) continue;
    needed[v->producer()->id()] = 1;
    v->producer()->for_each_input([&](Value* used) { work.push_back(used); });
  }
  for (const Node* node : graph.nodes()) {
    if (!needed[node->id()]) continue;
    // A node whose values were all given as inputs is cut off above; the rest are copied.
    bool all_given = true;
    for (Value* v : node->outputs()) all_given = all_given && map.contains(v);
    if (all_given) continue;
    copy_node(sub, graph, *node, map);
  }
  std::vector<Value*> results;
  for (Value* out : outputs) results.push_back(map.at(out));
  sub.set_outputs(std::move(results));
  return sub;
}

Value* ValueMap::at(const Value* v) const {
  Value* to = find(v);
  if (!to) throw std::out_of_range("%" + v->name() + " is not mapped");
  return to;
}

void ValueMap::set(const Value* v, Value* to) {
  if (v->graph() != source_) throw std::invalid_argument("%" + v->name() + " is not a value of the mapped graph");
  if (v->id() >= to_.size()) to_.resize(source_->value_id_limit(), nullptr);
  to_[v->id()] = to;
}

void copy_node(Graph& target, const Graph& source, const Node& node, ValueMap& map) {
  if (!node.is_call()) {
    Value* v = node.output();
    if (map.contains(v)) return;
    map.set(v, target.add_constant_ref(node.constant_name(), *v->meta(), v->name()));
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
  for (std::size_t i = 0; i < node.num_outputs(); ++i)
    if (!map.contains(node.output(i))) map.set(node.output(i), copy->output(i));
}

}  // namespace aotpipe
