#include <aotpipe/graph/meta_propagation.h>
#include <aotpipe/graph/kernel_arguments.h>

#include <ATen/ATen.h>
#include <ATen/core/stack.h>
#include <fmt/format.h>

namespace aotpipe {

at::Tensor make_meta_tensor(const TensorMeta& meta) {
  return at::empty_strided(meta.sizes, meta.strides, at::TensorOptions().dtype(meta.dtype).device(at::kMeta))
      .as_strided(meta.sizes, meta.strides, meta.storage_offset);
}

namespace {

at::Tensor meta_tensor_of(const Node& node, const Value* v) {
  if (!v->meta())
    throw GraphError(fmt::format("graph '{}': {} reads %{}, which has no TensorMeta", node.graph()->name(),
                                 "node " + node.label(), v->name()));
  return make_meta_tensor(*v->meta());
}
}  // namespace

void infer_node_meta(Node& node) {
  if (!node.is_call()) return;  // constants carry their own metadata
  torch::jit::Stack stack;
  const TensorMeta* first_tensor = nullptr;
  bool any_requires_grad = false;
  const auto& formals = node.schema().arguments();
  for (const Argument& arg : node.args()) {
    const std::size_t a = static_cast<std::size_t>(&arg - node.args().data());
    arg.for_each_value([&](Value* v) {
      if (!first_tensor && v->meta()) first_tensor = v->meta();
      any_requires_grad = any_requires_grad || (v->meta() && v->meta()->requires_grad);
    });
    if (arg.is_value()) {
      stack.emplace_back(meta_tensor_of(node, arg.value()));
    } else if (arg.is_constant()) {
      stack.push_back(kernel_constant(arg.constant(), a < formals.size() ? &formals[a] : nullptr));
    } else {
      bool optional = false;
      for (Value* v : arg.value_list().values) optional = optional || v == nullptr;
      const auto& formal = formals.at(a);
      auto elem = formal.type()->expectRef<c10::ListType>().getElementType();
      if (optional || elem->kind() == c10::TypeKind::OptionalType) {
        c10::List<std::optional<at::Tensor>> list;
        for (Value* v : arg.value_list().values)
          list.push_back(v ? std::optional(meta_tensor_of(node, v)) : std::nullopt);
        stack.emplace_back(std::move(list));
      } else {
        c10::List<at::Tensor> list;
        for (Value* v : arg.value_list().values) list.push_back(meta_tensor_of(node, v));
        stack.emplace_back(std::move(list));
      }
    }
  }
  try {
    node.op().callBoxed(stack);
  } catch (const std::exception& e) {
    throw GraphError(fmt::format("graph '{}': shape propagation of {} failed: {}", node.graph()->name(),
                                 "node " + node.label(), e.what()));
  }
  std::vector<c10::IValue> results;
  if (stack.size() == 1 && stack[0].isTensorList()) {
    for (const at::Tensor& t : stack[0].toTensorVector()) results.emplace_back(t);
  } else {
    results = std::move(stack);
  }
  if (results.size() != node.num_outputs())
    throw GraphError(fmt::format("graph '{}': {} produced {} results on meta tensors, the node defines {}",
                                 node.graph()->name(), "node " + node.label(), results.size(), node.num_outputs()));
  for (std::size_t k = 0; k < results.size(); ++k) {
    if (!results[k].isTensor()) continue;
    TensorMeta meta = TensorMeta::of(results[k].toTensor());
    meta.device = first_tensor ? first_tensor->device : c10::Device(c10::kCPU);
    meta.requires_grad = any_requires_grad && (c10::isFloatingType(meta.dtype) || c10::isComplexType(meta.dtype));
    node.output(k)->set_meta(std::move(meta));
  }
}

void propagate_meta(Graph& graph) {
  for (Node* node : graph.nodes()) infer_node_meta(*node);
}

}  // namespace aotpipe
