#include "aotpipe/random_inputs.h"

#include <aotpipe/graph/device_retarget.h>
#include <aotpipe/graph/example_tensor.h>
#include <aotpipe/graph/random_tensor.h>

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <fmt/format.h>

namespace aotpipe::cli {

std::vector<c10::IValue> make_inputs(const Graph& graph, at::Generator& gen) {
  std::vector<c10::IValue> inputs;
  inputs.reserve(graph.num_inputs());
  for (Value* in : graph.inputs()) {
    switch (in->type()) {
      case ValueType::Tensor:
        if (!in->meta()) throw GraphError(fmt::format("input %{} has no TensorMeta", in->name()));
        inputs.emplace_back(random_tensor(*in->meta(), gen));
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
    // A constant on a device this machine lacks (compiling for a GPU without one): metadata only.
    graph.bind_constant(key, device_available(meta->device) ? random_tensor(*meta, gen) : metadata_example(*meta));
    ++bound;
  }
  return bound;
}

}  // namespace aotpipe::cli
