#pragma once
// Example inputs given as metadata only, so a build host compiles for a device it does not have.
#include <aotpipe/graph/tensor_meta.h>

#include <ATen/core/Tensor.h>

namespace aotpipe {

// A tensor that stands for one described by `meta` (sizes, strides, storage offset, dtype,
// device, requires_grad) without its data: nothing is allocated (its storage is on the meta
// device) and no driver is called, yet device() reports meta.device (cuda:0...). Pass it as an
// example input to a fake trace or a compile (compile_batch, CompileJob::example_args); the
// compiled graphs then carry meta.device. Ops run on it compute metadata only; a Real-mode
// trace refuses it.
at::Tensor metadata_example(const TensorMeta& meta);

// True for a tensor made by metadata_example (or a view or detached copy of one).
bool is_metadata_example(const at::Tensor& tensor);

}  // namespace aotpipe
