#include "cuda_cases.h"

#include <ATen/ATen.h>

namespace aotpipe::testing {

at::Tensor cuda_randn(std::vector<int64_t> sizes, bool requires_grad) {
  return at::randn(sizes).to(kCuda).requires_grad_(requires_grad);
}

std::vector<CudaCase> cuda_cases() {
  std::vector<CudaCase> c;
  c.push_back({"mlp", [](const TensorList& a) { return TensorList{at::relu(at::addmm(a[2], a[0], a[1])).sum(1)}; },
               [] {
                 return TensorList{cuda_randn({8, 16}), cuda_randn({16, 32}, true), cuda_randn({32}, true)};
               }});
  c.push_back({"factories",
               [](const TensorList& a) {
                 const at::Tensor& x = a[0];
                 at::Tensor y = x * at::ones_like(x) + at::zeros({4, 8}, x.options()) + at::arange(8, x.options()) +
                                x.new_zeros({4, 8});
                 return TensorList{y.sin()};
               },
               [] {
                 return TensorList{cuda_randn({4, 8}, true)};
               }});
  c.push_back({"bf16_mm",
               [](const TensorList& a) {
                 return TensorList{at::mm(a[0].to(at::kBFloat16), a[1].to(at::kBFloat16)).to(at::kFloat)};
               },
               [] {
                 return TensorList{cuda_randn({8, 16}, true), cuda_randn({16, 4}, true)};
               },
               2e-2, 2e-2});
  c.push_back({"fp16_linear", [](const TensorList& a) { return TensorList{at::gelu(at::linear(a[0], a[1]))}; },
               [] {
                 return TensorList{cuda_randn({8, 16}).to(at::kHalf).requires_grad_(true),
                                   cuda_randn({4, 16}).to(at::kHalf).requires_grad_(true)};
               },
               1e-2, 1e-2});
  c.push_back({"conv_bn_train",
               [](const TensorList& a) {
                 at::Tensor y = at::conv2d(a[0], a[1], a[2], 1, 1);
                 y = at::batch_norm(y, a[3], a[4], a[5], a[6], true, 0.1, 1e-5, true);
                 return TensorList{at::relu(y)};
               },
               [] {
                 return TensorList{cuda_randn({2, 3, 8, 8}, true),
                                   cuda_randn({4, 3, 3, 3}, true),
                                   cuda_randn({4}, true),
                                   cuda_randn({4}, true),
                                   cuda_randn({4}, true),
                                   at::zeros({4}, kCuda),
                                   at::ones({4}, kCuda)};
               },
               1e-3, 1e-4});
  c.push_back(
      {"nll_loss_cpu_scale",
       [](const TensorList& a) { return TensorList{at::nll_loss(at::log_softmax(a[0], 1), a[1]) * a[2]}; },
       [] {
         return TensorList{cuda_randn({6, 10}, true), at::randint(0, 10, {6}).to(kCuda), at::scalar_tensor(0.5)};
       }});
  c.push_back({"input_mutation",
               [](const TensorList& a) {
                 a[1].mul_(0.9).add_(a[0].detach().mean(0), 0.1);
                 return TensorList{(a[0] - a[1]).pow(2).sum()};
               },
               [] {
                 return TensorList{cuda_randn({4, 5}, true), at::zeros({5}, kCuda)};
               }});
  c.push_back({"output_views",
               [](const TensorList& a) {
                 return TensorList{a[0].view(-1), a[0].t(), a[0] * 2};
               },
               [] {
                 return TensorList{cuda_randn({3, 4}, true)};
               }});
  c.push_back({"softmax_layer_norm",
               [](const TensorList& a) { return TensorList{at::layer_norm(at::softmax(a[0], -1), {16}, a[1], a[2])}; },
               [] {
                 return TensorList{cuda_randn({4, 16}, true), cuda_randn({16}, true), cuda_randn({16}, true)};
               }});
  // scaled_dot_product_attention picks a fused CUDA kernel by dtype: memory-efficient attention
  // for float32 (its RNG state comes back on the host), flash attention for bf16 (cuDNN's where
  // libtorch prefers it), and memory-efficient with a float mask (its gradient included).
  auto attention = [](at::ScalarType dtype, bool mask) {
    return [dtype, mask] {
      auto qkv = [dtype] { return cuda_randn({2, 4, 16, 32}).to(dtype).requires_grad_(true); };
      TensorList in{qkv(), qkv(), qkv()};
      if (mask) in.push_back(cuda_randn({2, 4, 16, 16}, true));
      return in;
    };
  };
  auto sdpa = [](const TensorList& a) {
    const bool mask = a.size() == 4;
    return TensorList{at::scaled_dot_product_attention(a[0], a[1], a[2], mask ? std::optional(a[3]) : std::nullopt, 0.0,
                                                       /*is_causal=*/!mask)};
  };
  c.push_back({"attention_fp32", sdpa, attention(at::kFloat, false), 1e-4, 1e-5});
  c.push_back({"attention_bf16", sdpa, attention(at::kBFloat16, false), 2e-2, 2e-2});
  c.push_back({"attention_fp32_mask", sdpa, attention(at::kFloat, true), 1e-4, 1e-5});
  c.push_back({"dropout_shape_only", [](const TensorList& a) { return TensorList{at::dropout(a[0], 0.0, true) * 2}; },
               [] { return TensorList{cuda_randn({32}, true)}; }});
  return c;
}

}  // namespace aotpipe::testing
