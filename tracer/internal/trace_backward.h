#pragma once
// The backward pass of a joint trace, run on the tracing thread by aotpipe itself.
#include <ATen/core/Tensor.h>

#include <vector>

namespace aotpipe::detail {

// What torch::autograd::grad(outputs, inputs, grad_outputs, retain_graph=false,
// create_graph=false, allow_unused=true) returns, computed by walking the autograd graph here
// instead of in libtorch's engine. Why: the engine keeps per-device stream bookkeeping (it stashes
// the caller's current stream for every GPU and syncs "leaf streams" with them at the end), which
// indexes past its table on a machine without a GPU when the traced tensors report cuda:N. A trace
// needs none of it: nodes run in the engine's order (ready nodes by decreasing sequence number),
// with its hooks, gradient validation (sum_to, dtype) and accumulation (InputBuffer). Nodes run
// outside the engine, so torch::autograd::get_current_node() is null: the caller marks what is
// recorded meanwhile as backward itself.
std::vector<at::Tensor> trace_backward(const std::vector<at::Tensor>& outputs, const std::vector<at::Tensor>& inputs,
                                       const std::vector<at::Tensor>& grad_outputs);

}  // namespace aotpipe::detail
