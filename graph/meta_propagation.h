#pragma once
// Shape propagation: fills in the TensorMeta of values by running each op on meta tensors
// (no data, no compute), through the same dispatcher kernels that eager mode would use.
#include <aotpipe/graph/graph.h>

namespace aotpipe {

// An empty meta-device tensor with the metadata's sizes, strides, offset and dtype.
at::Tensor make_meta_tensor(const TensorMeta& meta);

// Sets the TensorMeta of the node's outputs from its inputs' metadata. Outputs are on the
// first tensor input's device and require grad when any input does (and their dtype can).
// Throws GraphError naming the node
// when an input has no metadata or the op rejects the shapes.
void infer_node_meta(Node& node);
// infer_node_meta over the whole graph, in order.
void propagate_meta(Graph& graph);

}  // namespace aotpipe
