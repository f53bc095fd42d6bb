#pragma once
// Random tensors that match a TensorMeta exactly, for running or compiling graphs without real
// data (the CLI, graph_function's example arguments, tests).
#include <aotpipe/graph/tensor_meta.h>

#include <ATen/core/Generator.h>
#include <ATen/core/Tensor.h>

namespace aotpipe {

// A tensor with the metadata's sizes, strides, storage offset, dtype and device (not its
// requires_grad), viewing a fresh storage just large enough, filled from `gen`: normal values
// for floating and complex dtypes, 0/1 for bool, small non-negative integers (0..7) otherwise.
at::Tensor random_tensor(const TensorMeta& meta, at::Generator& gen);

}  // namespace aotpipe
