#pragma once
// The synthetic program of the end-to-end compile benchmark, op for op the same as
// `program` in compile_vs_python.py: a chain of `num_ops` ATen ops cycling through a matmul and
// three pointwise ops, on two 16x16 inputs that require grad (so a joint graph is traced and
// partitioned).
#include <aotpipe/stages/metadata/collect_metadata.h>

#include <ATen/ATen.h>

namespace aotpipe::bench {

inline Function synthetic_program(int num_ops) {
  return [num_ops](const TensorList& a) {
    at::Tensor x = a[0];
    const at::Tensor& w = a[1];
    for (int i = 0; i < num_ops; ++i) {
      switch (i % 4) {
        case 0: x = at::mm(x, w); break;
        case 1: x = x.sin(); break;
        case 2: x = x * w; break;
        default: x = x + 0.5; break;
      }
    }
    return TensorList{x};
  };
}

inline TensorList synthetic_inputs() {
  return {at::randn({16, 16}).requires_grad_(true), (at::randn({16, 16}) * 0.25).requires_grad_(true)};
}

}  // namespace aotpipe::bench
