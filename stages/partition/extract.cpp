#include <aotpipe/graph/memory_plan.h>
#include <aotpipe/graph/memory_schedule.h>
#include <aotpipe/graph/passes.h>
#include <aotpipe/stages/partition/internal/extract.h>

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <unordered_set>
#include <utility>

namespace aotpipe::partitioners::detail {
namespace {

// Only side-effecting calls are pinned to a phase: ask that first, the attribute map (text keys)
// is looked up for those alone.
bool must_be_in_backward(const Node& n) {
  if (!n.is_call() || !n.has_side_effects()) return false;
  auto it = n.attrs().find("phase");
  return it != n.attrs().end() && it->second == "backward";
}

bool must_be_in_forward(const Node& n) { return n.is_call() && n.has_side_effects() && !must_be_in_backward(n); }

}  // namespace

std::vector<const Node*> select_nodes(const Graph& graph, std::span<Value* const> inputs,
                                      std::span<Value* const> outputs, Subgraph which) {
  // Flat tables by Value::id and Node::id: this runs twice per partition over the whole joint.
  std::vector<char> given(graph.value_id_limit(), 0), valid(graph.node_id_limit(), 0), live(graph.node_id_limit(), 0);
  for (const Value* v : inputs) given[v->id()] = 1;
  auto available = [&](const Value* v) { return given[v->id()] || (v->producer() && valid[v->producer()->id()]); };
  for (const Node* n : graph.nodes()) {
    if (must_be_in_backward(*n) && which != Subgraph::Backward) continue;
    if (must_be_in_forward(*n) && which != Subgraph::Forward) continue;
    bool ok = true;
    for (const Argument& arg : n->args()) arg.for_each_value([&](Value* v) { ok = ok && available(v); });
    if (ok) valid[n->id()] = 1;
  }
  std::vector<const Value*> work;
  for (const Value* v : outputs) {
    if (!available(v))
      throw PartitionError(
          fmt::format("partition: %{} is an output of the {} graph but cannot be computed from its inputs", v->name(),
                      which == Subgraph::Forward ? "forward" : "backward"));
    work.push_back(v);
  }
  for (const Node* n : graph.nodes())
    if (valid[n->id()] && n->is_call() && n->has_side_effects())
      for (const Value* v : n->outputs()) work.push_back(v);
  std::size_t num_live = 0;
  while (!work.empty()) {
    const Value* v = work.back();
    work.pop_back();
    if (given[v->id()]) continue;
    const Node* n = v->producer();
    if (live[n->id()]) continue;
    live[n->id()] = 1;
    ++num_live;
    n->for_each_input([&](Value* in) { work.push_back(in); });
  }
  std::vector<const Node*> result;
  result.reserve(num_live);
  for (const Node* n : graph.nodes())
    if (live[n->id()]) result.push_back(n);
  return result;
}

std::vector<const Node*> autograd_engine_order(std::span<const Node* const> nodes, std::span<Value* const> inputs,
                                               std::span<Value* const> tangents, std::span<Value* const> outputs) {
  if (nodes.empty()) return {};
  // Flat tables by Node::id and Value::id of the nodes' graph.
  const Graph& graph = *nodes.front()->graph();
  constexpr std::size_t kNowhere = static_cast<std::size_t>(-1);
  std::vector<std::size_t> position(graph.node_id_limit(), kNowhere);
  for (std::size_t i = 0; i < nodes.size(); ++i) position[nodes[i]->id()] = i;
  std::vector<char> given(graph.value_id_limit(), 0), is_tangent(graph.value_id_limit(), 0);
  for (const Value* v : inputs) given[v->id()] = 1;
  for (const Value* v : tangents) is_tangent[v->id()] = 1;

  // The first node that reads a tangent; without one the order stays.
  std::size_t first_bwd = nodes.size();
  for (std::size_t i = 0; i < nodes.size() && first_bwd == nodes.size(); ++i)
    for (Value* v : nodes[i]->inputs())
      if (is_tangent[v->id()]) {
        first_bwd = i;
        break;
      }
  if (first_bwd == nodes.size()) return {nodes.begin(), nodes.end()};

  std::vector<const Node*> order;
  order.reserve(nodes.size());
  std::vector<char> placed(graph.node_id_limit(), 0);
  std::vector<std::uint32_t> seen_in(graph.node_id_limit(), 0);  // the call of place_with_producers that saw it
  std::uint32_t call = 0;
  std::vector<const Node*> pending;
  auto place_with_producers = [&](std::vector<const Node*> roots) {
    pending.clear();
    ++call;
    while (!roots.empty()) {
      const Node* n = roots.back();
      roots.pop_back();
      if (placed[n->id()] || seen_in[n->id()] == call) continue;
      if (position[n->id()] == kNowhere)
        throw std::logic_error("partition: the backward reads %" + n->output()->name() + ", which it does not compute");
      seen_in[n->id()] = call;
      pending.push_back(n);
      n->for_each_input([&](Value* v) {
        if (!given[v->id()]) roots.push_back(v->producer());
      });
    }
    std::sort(pending.begin(), pending.end(),
              [&](const Node* a, const Node* b) { return position[a->id()] < position[b->id()]; });
    for (const Node* n : pending) {
      placed[n->id()] = 1;
      order.push_back(n);
    }
  };
  // copy_ and set_ (a kept mutation of an input) need not read a tangent: they keep their place.
  auto is_kept_mutation = [](const Node& n) {
    if (!n.is_call()) return false;
    const c10::OperatorName& op = n.schema().operator_name();
    return (op.name == "aten::copy_" && op.overload_name.empty()) ||
           (op.name == "aten::set_" && op.overload_name == "source_Tensor");
  };
  for (std::size_t i = 0; i < first_bwd; ++i)
    if (is_kept_mutation(*nodes[i])) place_with_producers({nodes[i]});
  for (std::size_t i = first_bwd; i < nodes.size(); ++i) place_with_producers({nodes[i]});
  std::vector<const Node*> output_producers;
  for (Value* v : outputs)
    if (!given[v->id()]) output_producers.push_back(v->producer());
  place_with_producers(std::move(output_producers));
  // Nodes needed by nothing after the first backward node and by no output (side effects).
  for (const Node* n : nodes)
    if (!placed[n->id()]) place_with_producers({n});
  return order;
}

Graph build_graph(const Graph& graph, std::span<Value* const> inputs, std::span<const Node* const> nodes,
                  std::span<Value* const> outputs, std::string name, std::vector<const Node*>* copies) {
  Graph sub(std::move(name));
  ValueMap map(graph);
  for (Value* in : inputs) {
    if (map.contains(in))
      throw PartitionError(fmt::format("partition: %{} is given twice as an input of '{}'", in->name(), sub.name()));
    map.set(in, sub.add_input(in->name(), in->type(), in->meta() ? std::optional(*in->meta()) : std::nullopt));
  }
  if (copies) copies->clear();
  for (const Node* node : nodes) {
    const std::size_t before = sub.num_nodes();
    copy_node(sub, graph, *node, map);
    if (copies) copies->push_back(sub.num_nodes() > before ? sub.nodes().back() : nullptr);
  }
  std::vector<Value*> results;
  results.reserve(outputs.size());
  for (Value* out : outputs) results.push_back(map.at(out));
  sub.set_outputs(std::move(results));
  return sub;
}

namespace {

// Which of the backward's inputs it frees as it goes: a saved tensor whose memory is a primal's
// or a forward output's stays with its holder; the others and the tangents are handed over.
std::vector<InputLifetime> backward_input_lifetimes(const JointView& view, std::span<Value* const> saved) {
  // Memory the caller holds anyway: the primals (parameters, inputs) and the forward's outputs.
  std::unordered_set<const Value*> held;
  for (int p : view.primals) held.insert(view.nodes[static_cast<std::size_t>(p)].value);
  for (const Value* out : view.fwd_outputs)
    if (const Value* root = memory_root(*out)) held.insert(root);
  std::vector<InputLifetime> lifetimes;
  lifetimes.reserve(saved.size() + view.tangents.size());
  for (const Value* v : saved) {
    const Value* root = memory_root(*v);
    lifetimes.push_back(root && held.contains(root) ? InputLifetime::HeldByCaller : InputLifetime::FreedAfterLastUse);
  }
  lifetimes.insert(lifetimes.end(), view.tangents.size(), InputLifetime::FreedAfterLastUse);
  return lifetimes;
}

}  // namespace

PartitionResult assemble_partition(const Graph& joint, const JointView& view, std::vector<Value*> saved,
                                   bool autograd_order, bool reorder_for_peak_memory) {
  // Each value once, in the order given; tensors before numbers. Flat tables by Value::id.
  {
    std::vector<char> seen(joint.value_id_limit(), 0);
    std::vector<Value*> tensors, numbers;
    for (Value* v : saved) {
      if (std::exchange(seen[v->id()], 1)) continue;
      (v->is_tensor() ? tensors : numbers).push_back(v);
    }
    saved = std::move(tensors);
    saved.insert(saved.end(), numbers.begin(), numbers.end());
  }
  std::vector<Value*> tangents;
  for (int t : view.tangents) tangents.push_back(view.nodes[static_cast<std::size_t>(t)].value);
  auto backward_inputs = [&] {
    std::vector<Value*> inputs = saved;
    inputs.insert(inputs.end(), tangents.begin(), tangents.end());
    return inputs;
  };

  // Drop saved values the backward does not read.
  {
    std::vector<Value*> inputs = backward_inputs();
    std::vector<const Node*> nodes = select_nodes(joint, inputs, view.bwd_outputs, Subgraph::Backward);
    std::vector<char> read(joint.value_id_limit(), 0);
    for (const Value* v : view.bwd_outputs) read[v->id()] = 1;
    for (const Node* n : nodes) n->for_each_input([&](Value* v) { read[v->id()] = 1; });
    std::erase_if(saved, [&](Value* v) { return !read[v->id()]; });
  }

  PartitionResult result;
  result.num_fwd_outputs = view.fwd_outputs.size();
  std::vector<Value*> primals;
  for (int p : view.primals) primals.push_back(view.nodes[static_cast<std::size_t>(p)].value);
  std::vector<Value*> fwd_outputs = view.fwd_outputs;
  fwd_outputs.insert(fwd_outputs.end(), saved.begin(), saved.end());
  std::vector<char> in_forward(joint.node_id_limit(), 0);  // by the joint's Node::id
  {
    std::vector<const Node*> nodes = select_nodes(joint, primals, fwd_outputs, Subgraph::Forward);
    for (const Node* n : nodes) in_forward[n->id()] = 1;
    result.forward = build_graph(joint, primals, nodes, fwd_outputs, "forward");
  }
  std::vector<const Node*> backward_nodes, backward_copies;
  {
    std::vector<Value*> inputs = backward_inputs();
    backward_nodes = select_nodes(joint, inputs, view.bwd_outputs, Subgraph::Backward);
    if (autograd_order) backward_nodes = autograd_engine_order(backward_nodes, inputs, tangents, view.bwd_outputs);
    result.backward = build_graph(joint, inputs, backward_nodes, view.bwd_outputs, "backward", &backward_copies);
  }
  for (Value* v : saved) {
    result.saved_values.push_back(v->name());
    if (v->is_tensor() && v->meta()) result.saved_bytes += v->meta()->nbytes();
  }
  // A joint call copied into both graphs is computed again in the backward (constants are not).
  for (std::size_t i = 0; i < backward_nodes.size(); ++i)
    if (backward_nodes[i]->is_call() && in_forward[backward_nodes[i]->id()])
      result.recomputed.push_back(backward_copies[i]->label());
  // Last, the order of each graph for the fewest bytes alive at once: the backward frees its
  // saved tensors as it goes (the runtime hands them over), the forward's inputs are the caller's.
  result.backward_input_lifetimes = backward_input_lifetimes(view, saved);
  if (reorder_for_peak_memory) {
    result.forward_schedule = schedule_for_peak_memory(result.forward, InputLifetime::HeldByCaller);
    result.backward_schedule = schedule_for_peak_memory(result.backward, result.backward_input_lifetimes);
  } else {
    result.forward_schedule.peak_before = result.forward_schedule.peak_after =
        estimate_peak_bytes(result.forward, InputLifetime::HeldByCaller);
    result.backward_schedule.peak_before = result.backward_schedule.peak_after =
        estimate_peak_bytes(result.backward, result.backward_input_lifetimes);
  }
  return result;
}

}  // namespace aotpipe::partitioners::detail
