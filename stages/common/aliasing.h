#pragma once
// Tensor aliasing helpers shared by the synthetic-base stage and the runtime epilogue.
#include <aotpipe/graph/tensor_meta.h>
#include <aotpipe/stages/common/view_replay.h>

#include <ATen/core/Tensor.h>

#include <cstddef>
#include <set>
#include <vector>

namespace aotpipe {

// PyTorch's gen_alias_from_base: a view of `base` with the target's sizes, strides and storage
// offset (offsets are absolute in the shared storage) and dtype, with requires_grad patched to
// `target_requires_grad` (detach, or a fresh requires_grad_ on a tensor that does not require
// grad). With a `replay`, the view ops are re-applied (view replay); when that fails or lands on
// other geometry, and without one, a single as_strided (reinterpreted to the target's dtype).
at::Tensor gen_alias_from_base(const at::Tensor& base, const TensorMeta& target, bool target_requires_grad,
                               const ViewReplay* replay = nullptr);

// False when x and y may share an element (PyTorch's _tensors_definitely_do_not_overlap).
bool tensors_definitely_do_not_overlap(const at::Tensor& x, const at::Tensor& y);

// The indices (a subset of `candidates`) whose tensors overlap some other candidate.
std::set<std::size_t> compute_overlapping_inputs(const std::vector<at::Tensor>& inputs,
                                                 const std::vector<std::size_t>& candidates);

}  // namespace aotpipe
