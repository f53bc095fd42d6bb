#include <aotpipe/graph/random_tensor.h>

#include <ATen/ATen.h>

namespace aotpipe {

at::Tensor random_tensor(const TensorMeta& meta, at::Generator& gen) {
  const auto cpu = at::TensorOptions().dtype(meta.dtype);
  // The storage a strided view needs: one past its furthest element.
  int64_t span = meta.storage_offset + 1;
  for (std::size_t d = 0; d < meta.sizes.size(); ++d) {
    if (meta.sizes[d] == 0) { return at::empty_strided(meta.sizes, meta.strides, cpu.device(meta.device)); }
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

}  // namespace aotpipe
