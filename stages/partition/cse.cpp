#include <aotpipe/stages/partition/cse.h>

#include <aotpipe/stages/partition/op_classes.h>
#include <aotpipe/graph/memory_plan.h>

#include <cstdint>
#include <sstream>
#include <stdexcept>
#include <unordered_map>
#include <unordered_set>

namespace aotpipe::partitioners {
namespace {

const std::unordered_set<std::string>& rand_ops() {
  static const std::unordered_set<std::string> ops = {
      "aten::dropout",        "aten::_fused_dropout", "aten::_standard_gamma", "aten::bernoulli", "aten::multinomial",
      "aten::native_dropout", "aten::normal",         "aten::poisson",         "aten::binomial",  "aten::rrelu",
      "aten::rand_like",      "aten::rand",           "aten::randint",         "aten::randn",     "aten::randperm"};
  return ops;
}

// Keys are bytes, not text: a type tag, then fixed-size raw values or a count and its elements,
// so no two different keys read alike (and nothing is formatted: every call of a joint graph is
// keyed, and formatting was most of CSE's time on large graphs).
template <typename T>
void append_raw(std::string& key, T value) {
  key.append(reinterpret_cast<const char*>(&value), sizeof value);
}

// An exact key for a constant argument, its type included (1 and 1.0 differ, as in PyTorch's hash
// of (value, type) pairs).
void append_constant(std::string& key, const c10::IValue& v) {
  if (v.isNone()) {
    key += 'N';
  } else if (v.isBool()) {
    key += v.toBool() ? "b1" : "b0";
  } else if (v.isInt()) {
    key += 'i';
    append_raw(key, v.toInt());
  } else if (v.isDouble()) {
    key += 'd';
    append_raw(key, v.toDouble());  // its bits: -0.0 and 0.0 differ, as the text form's did
  } else if (v.isString()) {
    key += 's';
    append_raw<std::uint64_t>(key, v.toStringRef().size());
    key += v.toStringRef();
  } else if (v.isIntList()) {
    const auto list = v.toIntList();
    key += 'I';
    append_raw<std::uint64_t>(key, list.size());
    for (int64_t x : list) append_raw(key, x);
  } else if (v.isDoubleList()) {
    const auto list = v.toDoubleList();
    key += 'D';
    append_raw<std::uint64_t>(key, list.size());
    for (double x : list) append_raw(key, x);
  } else if (v.isBoolList()) {
    const auto list = v.toBoolList();
    key += 'B';
    append_raw<std::uint64_t>(key, list.size());
    for (bool x : list) key += x ? '1' : '0';
  } else {
    std::ostringstream os;  // devices, dtypes as ints above, and anything rarer
    os << v.tagKind() << ":" << v;
    const std::string text = os.str();
    key += 'o';
    append_raw<std::uint64_t>(key, text.size());
    key += text;
  }
}

// Storage classes, by Value::id: which values may share memory (the memory plan's walk over the
// schemas' alias annotations: viewed_argument).
std::vector<std::size_t> storage_classes(const Graph& graph) {
  std::vector<std::size_t> storage(graph.value_id_limit(), 0);
  std::size_t next = 0;
  for (Value* in : graph.inputs()) storage[in->id()] = next++;
  for (const Node* n : graph.nodes())
    for (std::size_t i = 0; i < n->num_outputs(); ++i) {
      const std::optional<std::size_t> viewed = viewed_argument(*n, i);
      storage[n->output(i)->id()] = viewed ? storage[n->args()[*viewed].value()->id()] : next++;
    }
  return storage;
}

// What CSE does to a graph, decided without building anything: the live nodes, and for each
// value of a dropped call the value of the earlier call that replaces it. Tables by Node::id and
// Value::id.
struct CsePlan {
  std::vector<char> live;
  std::size_t num_live = 0;
  std::vector<Value*> replaced;  // null: kept
  std::size_t dropped = 0;
  bool changes(const Graph& graph) const { return dropped > 0 || num_live != graph.num_nodes(); }
  bool is_live(const Node* n) const { return live[n->id()] != 0; }
  // The value that stands for v once the plan is applied: the earlier call's, or v itself.
  Value* current(Value* v) const {
    Value* r = replaced[v->id()];
    return r ? r : v;
  }
};

// The key of a call after replacement: two calls with the same key compute the same values.
// The operator by its schema's address (one per operator in the process), values by address.
std::string call_key(const Node& n, const CsePlan& plan) {
  std::string key;
  key.reserve(16 + 16 * n.args().size());
  append_raw(key, static_cast<const void*>(&n.schema()));
  append_raw<std::uint64_t>(key, n.num_outputs());
  for (const Argument& arg : n.args()) {
    if (arg.is_value()) {
      key += 'V';
      append_raw(key, static_cast<const void*>(plan.current(arg.value())));
    } else if (arg.is_value_list()) {
      key += 'L';
      append_raw<std::uint64_t>(key, arg.value_list().values.size());
      for (Value* v : arg.value_list().values) append_raw(key, static_cast<const void*>(v ? plan.current(v) : nullptr));
    } else {
      append_constant(key, arg.constant());
    }
  }
  return key;
}

CsePlan plan_cse(const Graph& graph) {
  CsePlan plan;
  plan.live.assign(graph.node_id_limit(), 0);
  plan.replaced.assign(graph.value_id_limit(), nullptr);
  // Dead code first (PyTorch runs joint_module.graph.eliminate_dead_code() before CSE).
  {
    std::vector<char> needed(graph.value_id_limit(), 0);
    for (const Value* v : graph.outputs()) needed[v->id()] = 1;
    auto nodes = graph.nodes();
    for (std::size_t i = nodes.size(); i-- > 0;) {
      const Node* n = nodes[i];
      bool is_live = n->is_call() && n->has_side_effects();
      for (Value* v : n->outputs()) is_live = is_live || needed[v->id()];
      if (!is_live) continue;
      plan.live[n->id()] = 1;
      ++plan.num_live;
      n->for_each_input([&](Value* v) { needed[v->id()] = 1; });
    }
  }
  const std::vector<std::size_t> storage = storage_classes(graph);
  std::unordered_set<std::size_t> output_storages;
  for (Value* v : graph.outputs()) output_storages.insert(storage[v->id()]);

  std::unordered_map<std::string, const Node*> seen;
  for (const Node* n : graph.nodes()) {
    if (!n->is_call() || !plan.is_live(n)) continue;
    const std::string& packet = n->schema().operator_name().name;
    bool candidate = !n->has_side_effects() && !rand_ops().count(packet) && packet != "aten::empty";
    for (Value* v : n->outputs()) candidate = candidate && !output_storages.count(storage[v->id()]);
    if (!candidate) continue;
    auto [earlier, first] = seen.try_emplace(call_key(*n, plan), n);
    if (first) continue;
    for (std::size_t i = 0; i < n->num_outputs(); ++i) plan.replaced[n->output(i)->id()] = earlier->second->output(i);
    ++plan.dropped;
  }
  return plan;
}

// `graph` as the plan says: live nodes that were not dropped, reading the replacing values.
Graph apply_cse(const Graph& graph, const CsePlan& plan) {
  Graph out(graph.name());
  std::vector<Value*> map(graph.value_id_limit(), nullptr);  // by Value::id
  auto mapped = [&](Value* v) {
    Value* m = map[plan.current(v)->id()];
    if (!m) throw std::logic_error("CSE: %" + v->name() + " is read before it is defined");
    return m;
  };
  for (Value* in : graph.inputs())
    map[in->id()] = out.add_input(in->name(), in->type(), in->meta() ? std::optional(*in->meta()) : std::nullopt);
  for (const Node* n : graph.nodes()) {
    if (!plan.is_live(n) || (n->num_outputs() > 0 && plan.replaced[n->output()->id()])) continue;
    if (!n->is_call()) {
      Value* v = n->output();
      map[v->id()] = out.add_constant_ref(n->constant_name(), *v->meta(), v->name());
      out.nodes().back()->attrs() = n->attrs();
      continue;
    }
    std::vector<Argument> args = n->args();
    for (Argument& arg : args) arg.remap_values(mapped);
    std::vector<OutputSpec> specs;
    for (Value* v : n->outputs())
      specs.push_back({v->name(), v->meta() ? std::optional(*v->meta()) : std::nullopt, v->type()});
    Node* copy = out.add_call(n->op(), std::move(args), std::move(specs));
    copy->attrs() = n->attrs();
    for (std::size_t i = 0; i < n->num_outputs(); ++i) map[n->output(i)->id()] = copy->output(i);
  }
  for (const auto& [key, tensor] : graph.tensor_constants()) out.bind_constant(key, tensor);
  std::vector<Value*> outs;
  for (Value* v : graph.outputs()) outs.push_back(mapped(v));
  out.set_outputs(std::move(outs));
  return out;
}

}  // namespace

Graph eliminate_common_subexpressions(const Graph& graph, std::size_t* merged) {
  const CsePlan plan = plan_cse(graph);
  if (merged) *merged = plan.dropped;
  return apply_cse(graph, plan);
}

std::optional<Graph> eliminate_common_subexpressions_if_any(const Graph& graph, std::size_t* merged) {
  const CsePlan plan = plan_cse(graph);
  if (merged) *merged = plan.dropped;
  if (!plan.changes(graph)) return std::nullopt;
  return apply_cse(graph, plan);
}

}  // namespace aotpipe::partitioners
