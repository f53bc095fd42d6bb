#include <aotpipe/graph/memory_plan.h>
#include <aotpipe/graph/layout_bounds.h>
#include <aotpipe/graph/op_properties.h>

#include <fmt/format.h>

#include <algorithm>

namespace aotpipe {
namespace {

// Where output `k` of a call gets its memory.
struct Origin {
  enum class Kind { Fresh, ViewOfArgument, Outside } kind = Kind::Outside;
  std::size_t argument = 0;  // ViewOfArgument: which of node.args()
};

const c10::Argument* return_of(const Node& node, std::size_t k) {
  const auto& returns = node.schema().returns();
  if (k < returns.size()) return &returns[k];
  // One list return (split, unbind, chunk) gives one output per element.
  if (returns.size() == 1 && returns[0].type()->kind() == c10::TypeKind::ListType) return &returns[0];
  return nullptr;
}

bool holds_tensors(const c10::TypePtr& type) {
  if (type->kind() == c10::TypeKind::TensorType) return true;
  return type->kind() == c10::TypeKind::ListType &&
         type->expectRef<c10::ListType>().getElementType()->kind() == c10::TypeKind::TensorType;
}

Origin origin_of(const Node& node, std::size_t k) {
  if (!node.is_call()) return {};
  const c10::Argument* ret = return_of(node, k);
  if (!ret || !holds_tensors(ret->type())) return {};
  auto value_argument = [&](std::size_t i) -> Origin {
    if (i >= node.args().size() || !node.args()[i].is_value()) return {};
    return {Origin::Kind::ViewOfArgument, i};
  };
  if (!ret->alias_info()) {
    if (returns_hidden_view(node.op())) return value_argument(0);
    return {Origin::Kind::Fresh, 0};
  }
  // The argument whose alias set the return shares: `self` for every view op. A list return
  // carries its set on the element type (`Tensor(a)[]`).
  auto sets_of = [](const c10::AliasInfo& info) {
    std::vector<c10::Symbol> sets(info.beforeSets().begin(), info.beforeSets().end());
    for (const c10::AliasInfo& contained : info.containedTypes())
      sets.insert(sets.end(), contained.beforeSets().begin(), contained.beforeSets().end());
    return sets;
  };
  const std::vector<c10::Symbol> sets = sets_of(*ret->alias_info());
  const auto& arguments = node.schema().arguments();
  for (std::size_t i = 0; i < arguments.size(); ++i) {
    const c10::AliasInfo* info = arguments[i].alias_info();
    if (!info) continue;
    for (const c10::Symbol& set : sets_of(*info))
      if (std::find(sets.begin(), sets.end(), set) != sets.end()) return value_argument(i);
  }
  return value_argument(0);  // an alias the schema does not pair with an argument: self's, to be safe
}

std::size_t storage_bytes(const TensorMeta& meta) {
  const auto bytes = static_cast<std::size_t>(storage_extent(meta)) * c10::elementSize(meta.dtype);
  return (bytes + MemoryPlan::kAlignment - 1) / MemoryPlan::kAlignment * MemoryPlan::kAlignment;
}

bool alive_together(const PlannedTensor& a, const PlannedTensor& b) { return a.first <= b.last && b.first <= a.last; }

// Greedy by size: the biggest tensors first, each at the lowest offset that none of the tensors
// placed before it and alive with it covers.
void place(MemoryPlan& plan) {
  std::vector<std::size_t> order(plan.tensors.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t a, std::size_t b) { return plan.tensors[a].bytes > plan.tensors[b].bytes; });
  std::vector<const PlannedTensor*> placed;
  std::vector<const PlannedTensor*> neighbours;
  for (std::size_t index : order) {
    PlannedTensor& t = plan.tensors[index];
    neighbours.clear();
    for (const PlannedTensor* p : placed)
      if (alive_together(*p, t)) neighbours.push_back(p);
    std::sort(neighbours.begin(), neighbours.end(),
              [](const PlannedTensor* a, const PlannedTensor* b) { return a->offset < b->offset; });
    std::size_t offset = 0;
    for (const PlannedTensor* p : neighbours) {
      if (p->offset >= offset + t.bytes) break;
      offset = std::max(offset, p->offset + p->bytes);
    }
    t.offset = offset;
    plan.arena_bytes = std::max(plan.arena_bytes, offset + t.bytes);
    placed.push_back(&t);
  }
}

}  // namespace

const Value* allocation_of(const Value& v) {
  const Value* root = memory_root(v);
  return root && !root->is_input() ? root : nullptr;
}

std::optional<std::size_t> viewed_argument(const Node& node, std::size_t k) {
  const Origin origin = origin_of(node, k);
  if (origin.kind != Origin::Kind::ViewOfArgument) return std::nullopt;
  return origin.argument;
}

const Value* memory_root(const Value& v) {
  const Value* value = &v;
  for (;;) {
    const Node* producer = value->producer();
    if (!producer) return value->is_tensor() ? value : nullptr;
    const Origin origin = origin_of(*producer, value->output_index());
    if (origin.kind == Origin::Kind::Fresh) return value;
    if (origin.kind == Origin::Kind::Outside) return nullptr;
    value = producer->args()[origin.argument].value();
  }
}

namespace {

// add(a, b) with alpha 1 and mul(a, b) are b + a and b * a, bit for bit: their result may go
// into `other` as well (the tied embedding's gradient: t(mm) + embedding_dense_backward).
bool is_commutative(const Node& node) {
  const std::string name = node.qualified_name();
  if (name == "aten::mul.Tensor") return true;
  if (name != "aten::add.Tensor") return false;
  const auto& args = node.args();
  return args.size() < 3 || (args[2].is_constant() && args[2].constant().isInt() && args[2].constant().toInt() == 1);
}

}  // namespace

std::vector<std::size_t> reinplace_candidates(const Node& node) {
  std::vector<std::size_t> candidates;
  if (!node.is_call() || node.outputs().size() != 1 || !node.output()->meta()) return candidates;
  const TensorMeta& out = *node.output()->meta();
  auto writable = [&](std::size_t k) {
    if (k >= node.args().size() || !node.args()[k].is_value()) return false;
    const Value& in = *node.args()[k].value();
    return in.meta() && allocation_of(in) != nullptr && in.meta()->same_layout(out);
  };
  if (writable(0)) candidates.push_back(0);
  if (is_commutative(node) && writable(1)) candidates.push_back(1);
  if (!candidates.empty() && !pointwise_inplace_variant(node.op())) candidates.clear();
  return candidates;
}

MemoryPlan plan_memory(const Graph& graph, const PlaceableCall& placeable) {
  MemoryPlan plan;
  const auto nodes = graph.nodes();
  // Per value id: the value owning its memory (memoized in node order), and the index of the
  // owner's PlannedTensor.
  std::vector<const Value*> owner(graph.value_id_limit(), nullptr);
  std::vector<std::size_t> planned(graph.value_id_limit(), static_cast<std::size_t>(-1));
  std::vector<bool> escapes(graph.value_id_limit(), false);
  auto owner_of = [&](const Value* v) { return v->id() < owner.size() ? owner[v->id()] : nullptr; };

  for (std::size_t i = 0; i < nodes.size(); ++i) {
    const Node& node = *nodes[i];
    const bool may_place = !placeable || !node.is_call() || placeable(node);
    node.for_each_input([&](const Value* v) {
      const Value* o = owner_of(v);
      if (o && planned[o->id()] != static_cast<std::size_t>(-1))
        plan.tensors[planned[o->id()]].last = std::max(plan.tensors[planned[o->id()]].last, i);
    });
    for (std::size_t k = 0; k < node.num_outputs(); ++k) {
      const Value* out = node.outputs()[k];
      const Origin origin = origin_of(node, k);
      if (origin.kind == Origin::Kind::ViewOfArgument) {
        owner[out->id()] = owner_of(node.args()[origin.argument].value());
        continue;
      }
      if (origin.kind != Origin::Kind::Fresh) continue;
      owner[out->id()] = out;
      if (return_of(node, k)->type()->kind() != c10::TypeKind::TensorType) {
        escapes[out->id()] = true;  // an element of a fresh list: left to the kernel
        continue;
      }
      if (!out->meta()) {
        ++plan.unsized;
        continue;
      }
      if (!may_place) {
        ++plan.unplaced;
        continue;
      }
      const std::size_t bytes = storage_bytes(*out->meta());
      if (bytes == 0) continue;
      planned[out->id()] = plan.tensors.size();
      plan.tensors.push_back({out, bytes, i, i, 0});
    }
  }
  for (const Value* out : graph.outputs())
    if (const Value* o = owner_of(out)) escapes[o->id()] = true;

  std::vector<PlannedTensor> kept;
  kept.reserve(plan.tensors.size());
  for (const PlannedTensor& t : plan.tensors) {
    if (escapes[t.value->id()]) continue;
    kept.push_back(t);
  }
  plan.escaping = static_cast<std::size_t>(std::count(escapes.begin(), escapes.end(), true));
  plan.tensors = std::move(kept);

  std::vector<int64_t> delta(nodes.size() + 1, 0);
  for (const PlannedTensor& t : plan.tensors) {
    plan.unshared_bytes += t.bytes;
    delta[t.first] += static_cast<int64_t>(t.bytes);
    delta[t.last + 1] -= static_cast<int64_t>(t.bytes);
  }
  int64_t live = 0;
  for (int64_t d : delta) plan.peak_live_bytes = std::max(plan.peak_live_bytes, static_cast<std::size_t>(live += d));
  place(plan);
  return plan;
}

std::optional<std::string> plan_overlap(const MemoryPlan& plan) {
  auto range = [](const PlannedTensor& t) { return fmt::format("[{}, {})", t.offset, t.offset + t.bytes); };
  std::vector<const PlannedTensor*> by_offset;
  for (const PlannedTensor& t : plan.tensors) {
    if (t.offset + t.bytes > plan.arena_bytes)
      return fmt::format("%{} {} ends past the arena of {} bytes", t.value->name(), range(t), plan.arena_bytes);
    if (t.first > t.last)
      return fmt::format("%{} dies (node {}) before it is made (node {})", t.value->name(), t.last, t.first);
    if (t.bytes) by_offset.push_back(&t);
  }
  std::sort(by_offset.begin(), by_offset.end(),
            [](const PlannedTensor* a, const PlannedTensor* b) { return a->offset < b->offset; });
  for (std::size_t i = 0; i < by_offset.size(); ++i) {
    const PlannedTensor& a = *by_offset[i];
    for (std::size_t j = i + 1; j < by_offset.size() && by_offset[j]->offset < a.offset + a.bytes; ++j) {
      const PlannedTensor& b = *by_offset[j];
      if (alive_together(a, b))
        return fmt::format("%{} {} and %{} {} share bytes while both are alive (node {})", a.value->name(), range(a),
                           b.value->name(), range(b), std::max(a.first, b.first));
    }
  }
  return std::nullopt;
}

}  // namespace aotpipe
