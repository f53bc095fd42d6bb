#include <aotpipe/stages/common/aliasing.h>

#include <ATen/ATen.h>

namespace aotpipe {

namespace {

at::Tensor patch_requires_grad(at::Tensor out, const at::Tensor& base, bool target_requires_grad) {
  if (base.requires_grad() && !target_requires_grad)
    out = out.detach();
  else if (!base.requires_grad() && target_requires_grad)
    out.requires_grad_(true);
  return out;
}

bool has_geometry(const at::Tensor& t, const TensorMeta& target) {
  return t.sizes() == at::IntArrayRef(target.sizes) && t.strides() == at::IntArrayRef(target.strides) &&
         t.storage_offset() == target.storage_offset && t.scalar_type() == target.dtype;
}

}  // namespace

at::Tensor gen_alias_from_base(const at::Tensor& base, const TensorMeta& target, bool target_requires_grad,
                               const ViewReplay* replay) {
  if (replay) {
    try {
      at::Tensor out = replay->apply(base);
      if (has_geometry(out, target)) return patch_requires_grad(std::move(out), base, target_requires_grad);
    } catch (const std::exception&) {
      // The chain does not apply to this base (e.g. its start had other geometry): as_strided.
    }
  }
  at::Tensor out;
  if (base.is_complex() && !c10::isComplexType(target.dtype))
    out = at::view_as_real(base).as_strided(target.sizes, target.strides, target.storage_offset);
  else if (!base.is_complex() && c10::isComplexType(target.dtype))
    out = at::view_as_complex(base).as_strided(target.sizes, target.strides, target.storage_offset);
  else
    out = base.as_strided(target.sizes, target.strides, target.storage_offset);
  out = patch_requires_grad(std::move(out), base, target_requires_grad);
  if (out.scalar_type() != target.dtype) out = out.view(target.dtype);
  return out;
}

bool tensors_definitely_do_not_overlap(const at::Tensor& a, const at::Tensor& b) {
  if (a.unsafeGetTensorImpl() == b.unsafeGetTensorImpl()) return false;
  if (a.numel() == 0 || b.numel() == 0) return true;
  const at::Tensor& x = a.storage_offset() <= b.storage_offset() ? a : b;  // x starts first
  const at::Tensor& y = &x == &a ? b : a;
  if (x.is_contiguous() && y.is_contiguous()) return x.storage_offset() + x.numel() <= y.storage_offset();
  int64_t x_last = x.storage_offset();
  for (int64_t d = 0; d < x.dim(); ++d) x_last += (x.size(d) - 1) * x.stride(d);
  if (x_last < y.storage_offset()) return true;
  // Row-contiguous 2-d tensors with the same row stride (the Shampoo optimizer case).
  if (x.dim() == 2 && y.dim() == 2 && x.stride(1) == 1 && y.stride(1) == 1 && x.stride(0) == y.stride(0)) {
    const int64_t delta = y.storage_offset() - x.storage_offset();
    if (delta < x.size(1)) return false;
    if (x.stride(0) * (x.size(0) - 1) + x.size(1) <= delta) return true;
    return delta % x.stride(0) + y.size(1) <= x.stride(0);
  }
  return false;
}

std::set<std::size_t> compute_overlapping_inputs(const std::vector<at::Tensor>& inputs,
                                                 const std::vector<std::size_t>& candidates) {
  std::set<std::size_t> overlapping;
  for (std::size_t i = 0; i < candidates.size(); ++i)
    for (std::size_t j = i + 1; j < candidates.size(); ++j)
      if (!tensors_definitely_do_not_overlap(inputs[candidates[i]], inputs[candidates[j]])) {
        overlapping.insert(candidates[i]);
        overlapping.insert(candidates[j]);
      }
  return overlapping;
}

}  // namespace aotpipe
