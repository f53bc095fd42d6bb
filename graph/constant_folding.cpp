#include <aotpipe/graph/autocast_region.h>
#include <aotpipe/graph/grad_mode_region.h>
#include <aotpipe/graph/constant_folding.h>
#include <aotpipe/graph/layout_bounds.h>
#include <aotpipe/graph/memory_plan.h>

#include <ATen/core/dispatch/Dispatcher.h>

#include <unordered_set>

namespace aotpipe {
namespace {

bool is_pure(const Node& node) {
  const c10::OperatorHandle& op = node.op();
  if (op.hasTag(at::Tag::nondeterministic_seeded) || node.schema().is_mutable()) return false;
  for (const c10::Argument& a : node.schema().arguments()) {
    const c10::TypePtr& type = a.type();
    const c10::TypePtr element =
        type->kind() == c10::TypeKind::OptionalType ? type->expectRef<c10::OptionalType>().getElementType() : type;
    if (element->kind() == c10::TypeKind::GeneratorType) return false;
  }
  return !AutocastRegion::of(node) && !grad_mode_region_of(node);
}

bool small_enough(const Node& node, const ConstantFoldingOptions& options) {
  for (const Value* out : node.outputs()) {
    if (!out->is_tensor()) continue;
    if (!out->meta()) return false;
    if (storage_extent(*out->meta()) * static_cast<int64_t>(c10::elementSize(out->meta()->dtype)) >
        options.max_result_bytes)
      return false;
  }
  return true;
}

}  // namespace

std::vector<bool> foldable_calls(const Graph& graph, const ConstantFoldingOptions& options) {
  const auto nodes = graph.nodes();
  // Values a caller receives: the graph's outputs and the calls whose memory they are.
  std::unordered_set<const Value*> escaping;
  for (const Value* out : graph.outputs()) {
    escaping.insert(out);
    if (const Value* root = memory_root(*out)) escaping.insert(root);
  }
  std::vector<bool> known(graph.value_id_limit(), false);  // a constant, or a foldable call's result
  std::vector<bool> foldable(nodes.size(), false);
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    const Node& node = *nodes[i];
    if (!node.is_call()) {
      for (const Value* out : node.outputs()) known[out->id()] = true;
      continue;
    }
    bool from_constants = true;
    node.for_each_input([&](const Value* v) { from_constants = from_constants && v && known[v->id()]; });
    if (!from_constants || !is_pure(node) || !small_enough(node, options)) continue;
    bool escapes = false;
    for (const Value* out : node.outputs()) escapes = escapes || escaping.count(out) > 0;
    if (escapes) continue;
    foldable[i] = true;
    for (const Value* out : node.outputs()) known[out->id()] = true;
  }
  return foldable;
}

}  // namespace aotpipe
