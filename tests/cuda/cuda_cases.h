#pragma once
// Programs on CUDA tensors that the CUDA tests compile and compare with eager: an MLP, factories,
// bf16/fp16 matmuls, conv + batch norm in training, a loss with a 0-dim CPU scale, an input
// mutation, outputs that view the input, softmax + layer norm, fused attention (fp32, bf16, with
// a mask), dropout. Shared by cuda_runtime_test (the interpreter backend) and cuda_graphs_test
// (the CUDA-graph backend).
#include <aotpipe/graph/calling_convention.h>

#include <c10/core/Device.h>
#include <gtest/gtest.h>
#include <torch/cuda.h>

#include <functional>
#include <string>
#include <vector>

// First statement of a test that needs a GPU: elsewhere it is reported as skipped, with the reason.
#define REQUIRE_GPU()                                                            \
  if (!torch::cuda::is_available())                                              \
  GTEST_SKIP() << "no CUDA GPU on this machine (torch::cuda::is_available() is " \
                  "false)"

namespace aotpipe::testing {

inline const c10::Device kCuda(c10::kCUDA, 0);

// Inputs drawn on the CPU from a fixed seed, then moved: identical for eager and compiled.
at::Tensor cuda_randn(std::vector<int64_t> sizes, bool requires_grad = false);

struct CudaCase {
  std::string name;
  Function fn;
  std::function<TensorList()> inputs;
  double rtol = 1e-4, atol = 1e-5;
};

std::vector<CudaCase> cuda_cases();

}  // namespace aotpipe::testing
