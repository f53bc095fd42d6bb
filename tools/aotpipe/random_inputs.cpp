#include "aotpipe/random_inputs.h"

#include <ATen/CPUGeneratorImpl.h>
#include <fmt/format.h>

namespace aotpipe::cli {

at::Tensor make_tensor(const TensorMeta& meta, at::Generator& gen) {
  const auto cpu = at::TensorOptions().dtype(meta.dtype);
  // The storage a strided view needs: one past its furthest element.
  int64_t span = meta.storage_offset + 1;
  for (std::size_t d = 0; d < meta.sizes.size(); ++d) {
    if (meta.sizes[d] == 0) {
      return at::empty_strided(meta.sizes, meta.strides, cpu.device(meta.device));
    }
    span += (meta.sizes[d] - 1) * meta.strides[d];
  }
  at::Tensor storage;
  if (at::isFloatingType(meta.dtype) || at::isComplexType(meta.dtype)) {
    storage = at::randn({span}, gen, cpu);
  } else if (meta.dtype == at::kBool) {
    storage = at::randint(0, 2, {span}, gen, at::TensorOptions().dtype(at::kLong)).to(at::kBool);
  } else {
    storage = at::randint(0, 8, {span}, gen, cpu);
  }
  if (meta.device != storage.device()) storage = storage.to(meta.device);
  return storage.as_strided(meta.sizes, meta.strides, meta.storage_offset);
}

std::vector<c10::IValue> make_inputs(const Graph& graph, at::Generator& gen) {
  std::vector<c10::IValue> inputs;
  inputs.reserve(graph.num_inputs());
  for (Value* in : graph.inputs()) {
    switch (in->type()) {
      case ValueType::Tensor:
        if (!in->meta()) throw GraphError(fmt::format("input %{} has no TensorMeta", in->name()));
        inputs.emplace_back(make_tensor(*in->meta(), gen));
        break;
      case ValueType::Int:
        inputs.emplace_back(at::randint(1, 5, {1}, gen, at::TensorOptions().dtype(at::kLong)).item<int64_t>());
        break;
      case ValueType::Float:
      case ValueType::Scalar:
        inputs.emplace_back(at::randn({1}, gen, at::TensorOptions().dtype(at::kDouble)).item<double>());
        break;
      case ValueType::Bool:
        inputs.emplace_back(at::randint(0, 2, {1}, gen, at::TensorOptions().dtype(at::kLong)).item<int64_t>() != 0);
        break;
    }
  }
  return inputs;
}

std::size_t bind_random_constants(Graph& graph, at::Generator& gen) {
  std::size_t bound = 0;
  for (Node* node : graph.nodes()) {
    if (node->kind() != NodeKind::Constant) continue;
    const std::string& key = node->constant_name();
    auto it = graph.tensor_constants().find(key);
    if (it != graph.tensor_constants().end() && it->second.defined()) continue;
    const TensorMeta* meta = node->output()->meta();
    if (!meta) throw GraphError(fmt::format("constant \"{}\" has no TensorMeta", key));
    graph.bind_constant(key, make_tensor(*meta, gen));
    ++bound;
  }
  return bound;
}

}  // namespace aotpipe::cli
