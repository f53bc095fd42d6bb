#include <aotpipe/graph/interpreter.h>
#include <aotpipe/graph/passes.h>
#include <aotpipe/graph/printer.h>
#include <aotpipe/stages/common/view_replay.h>

#include <ATen/core/function_schema.h>

namespace aotpipe {

ViewReplay::ViewReplay(Graph chain)
    : graph_(std::make_shared<const Graph>(std::move(chain))),
      interpreter_(std::make_shared<const Interpreter>(*graph_)) {}

at::Tensor ViewReplay::apply(const at::Tensor& base) const { return interpreter_->run({base}).at(0); }

bool ViewReplay::operator==(const ViewReplay& other) const {
  return graph_ == other.graph_ || print_graph(*graph_) == print_graph(*other.graph_);
}

bool is_view_call(const Node& node) {
  if (!node.is_call() || node.has_side_effects()) return false;
  const c10::FunctionSchema& schema = node.schema();
  if (schema.arguments().empty() || schema.returns().size() != 1) return false;
  const c10::AliasInfo* returned = schema.returns()[0].alias_info();
  const c10::AliasInfo* self = schema.arguments()[0].alias_info();
  if (!returned || !self || returned->isWrite()) return false;
  // The result aliases the first argument: the same alias set (`Tensor(a) self -> Tensor(a)`,
  // or `Tensor(a)[]` for split/unbind).
  for (const auto& set : returned->beforeSets())
    if (self->beforeSets().count(set)) return true;
  for (const auto& inner : returned->containedTypes())
    for (const auto& set : inner.beforeSets())
      if (self->beforeSets().count(set)) return true;
  return false;
}

std::optional<ViewReplay> extract_view_replay(const Graph& graph, const Value* value) {
  const Node* node = value->producer();
  if (!node || !is_view_call(*node)) return std::nullopt;
  Value* start = nullptr;
  while (node && is_view_call(*node)) {
    const Argument& self = node->args().at(0);
    if (!self.is_value()) return std::nullopt;
    // Every other argument must be a constant: the replay graph has no other input.
    for (std::size_t i = 1; i < node->args().size(); ++i) {
      bool reads_value = false;
      node->args()[i].for_each_value([&](Value*) { reads_value = true; });
      if (reads_value) return std::nullopt;
    }
    start = self.value();
    node = start->producer();
  }
  Value* const inputs[] = {start};
  Value* const outputs[] = {const_cast<Value*>(value)};
  Graph chain = extract_subgraph(graph, inputs, outputs, "view_replay");
  // The chain alone, whichever trace it came from (an analysis or a joint trace): no phase
  // attribute, and the base stands for any tensor of its geometry, whether it requires grad
  // being the runtime base's.
  for (Node* n : chain.nodes()) n->attrs().clear();
  if (const TensorMeta* meta = chain.inputs()[0]->meta(); meta && meta->requires_grad) {
    TensorMeta base = *meta;
    base.requires_grad = false;
    chain.inputs()[0]->set_meta(std::move(base));
  }
  return ViewReplay(std::move(chain));
}

}  // namespace aotpipe
