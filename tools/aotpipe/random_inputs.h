#pragma once
// Random graph inputs and constants (graph/random_tensor.h per tensor), for running graphs
// without real data.
#include <aotpipe/graph/graph.h>

#include <ATen/ATen.h>

#include <cstdint>
#include <vector>

namespace aotpipe::cli {

// One value per graph input, in order: tensors from their TensorMeta; Int inputs 1..4, Float
// inputs normal, Bool inputs random. Throws GraphError for a tensor input without metadata.
std::vector<c10::IValue> make_inputs(const Graph& graph, at::Generator& gen);

// Binds a random tensor, made from the constant node's declared metadata, to every tensor
// constant of the graph that has no tensor yet. Returns how many were bound.
std::size_t bind_random_constants(Graph& graph, at::Generator& gen);

}  // namespace aotpipe::cli
