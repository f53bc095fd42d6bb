#include <aotpipe/graph/example_tensor.h>

#include <ATen/ATen.h>
#include <ATen/EmptyTensor.h>
#include <c10/core/TensorImpl.h>

namespace aotpipe {
namespace {

// Only the constructor differs from a meta tensor's impl: the reported device. Copies made by
// libtorch (detach, views) are plain TensorImpls that keep the key set and the device.
class MetadataExampleImpl final : public c10::TensorImpl {
 public:
  MetadataExampleImpl(c10::Storage storage, caffe2::TypeMeta dtype, c10::Device device)
      : c10::TensorImpl(std::move(storage), c10::DispatchKeySet(c10::DispatchKey::Meta), dtype) {
    device_opt_ = device;
  }
};

}  // namespace

at::Tensor metadata_example(const TensorMeta& meta) {
  const auto dtype = c10::scalarTypeToTypeMeta(meta.dtype);
  const auto nbytes = at::detail::computeStorageNbytes(meta.sizes, meta.strides, dtype.itemsize(), meta.storage_offset);
  at::Tensor bytes = at::empty({static_cast<int64_t>(nbytes)}, at::TensorOptions().dtype(at::kByte).device(c10::kMeta));
  if (meta.device.is_meta()) {
    at::Tensor t = at::empty({0}, at::TensorOptions().dtype(meta.dtype).device(c10::kMeta))
                       .set_(bytes.storage(), meta.storage_offset, meta.sizes, meta.strides);
    if (meta.requires_grad) t.requires_grad_(true);
    return t;
  }
  at::Tensor t = at::detail::make_tensor<MetadataExampleImpl>(c10::Storage(bytes.storage()), dtype, meta.device);
  t.unsafeGetTensorImpl()->set_sizes_and_strides(meta.sizes, meta.strides, meta.storage_offset);
  if (meta.requires_grad) t.requires_grad_(true);
  return t;
}

bool is_metadata_example(const at::Tensor& tensor) {
  return tensor.defined() && tensor.key_set().has_backend(c10::BackendComponent::MetaBit) && !tensor.is_meta();
}

}  // namespace aotpipe
