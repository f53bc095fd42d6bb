// Meta kernels of the fused attention kernels scaled_dot_product_attention picks:
//  - the CPU flash attention: the output is laid out [B, T, H, D] in memory (a transposed view of
//    [B, H, T, D]), the logsumexp is float [B, H, T] over a [B, T, H] buffer, and the gradients
//    are [B, T, H, D] in memory like the output;
//  - the CUDA ones (memory-efficient, flash, cuDNN), ported from torch/_meta_registrations.py and
//    checked against the CUDA kernels on a GPU (cuda_runtime_test, Cuda.AttentionMetaKernelsMatchCuda). Their RNG state
//    (philox seed and offset) is reported on the traced device, as Python's fake tensors report
//    it; the memory-efficient kernel really makes it on the host (capture_safety.h).
#include <aotpipe/tracer/internal/meta_support.h>

#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like.h>

#include <algorithm>
#include <numeric>

namespace aotpipe::detail {
namespace {

using at::Tensor;

// Sizes [B, H, T, D], memory [B, T, H, D].
Tensor empty_bthd(at::IntArrayRef sizes, const at::TensorOptions& options) {
  return at::empty({sizes[0], sizes[2], sizes[1], sizes[3]}, options).transpose(1, 2);
}

void check_qkv(const Tensor& query, const Tensor& key, const Tensor& value) {
  TORCH_CHECK(query.dim() == 4 && key.dim() == 4 && value.dim() == 4,
              "scaled_dot_product_flash_attention_for_cpu: expected 4-d query, key and value, got ", query.sizes(),
              ", ", key.sizes(), " and ", value.sizes());
  TORCH_CHECK(query.scalar_type() == key.scalar_type() && query.scalar_type() == value.scalar_type(),
              "scaled_dot_product_flash_attention_for_cpu: expected query, key and value to have the same dtype, got ",
              query.scalar_type(), ", ", key.scalar_type(), " and ", value.scalar_type());
}

std::tuple<Tensor, Tensor> flash_attention_for_cpu_meta(const Tensor& query, const Tensor& key, const Tensor& value,
                                                        double, bool, const std::optional<Tensor>&,
                                                        std::optional<double>) {
  check_qkv(query, key, value);
  Tensor output = at::empty_like(query);
  const auto accumulate = at::isReducedFloatingType(query.scalar_type()) ? at::kFloat : query.scalar_type();
  Tensor logsumexp =
      at::empty({query.size(0), query.size(2), query.size(1)}, query.options().dtype(accumulate)).transpose(1, 2);
  return {output, logsumexp};
}

std::tuple<Tensor, Tensor, Tensor> flash_attention_for_cpu_backward_meta(const Tensor&, const Tensor& query,
                                                                         const Tensor& key, const Tensor& value,
                                                                         const Tensor&, const Tensor&, double, bool,
                                                                         const std::optional<Tensor>&,
                                                                         std::optional<double>) {
  check_qkv(query, key, value);
  return {empty_bthd(query.sizes(), query.options()), empty_bthd(key.sizes(), key.options()),
          empty_bthd(value.sizes(), value.options())};
}

// ---- CUDA kernels ----

Tensor rng_scalar(const Tensor& like, at::ScalarType dtype) { return at::empty({}, like.options().dtype(dtype)); }

// A [B, H, S, D] tensor whose dimensions lie in memory in the order of `like`'s (cuDNN's
// alloc_with_matching_layout).
Tensor empty_matching_layout(const Tensor& like, at::IntArrayRef sizes) {
  std::vector<int64_t> order(static_cast<std::size_t>(like.dim()));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return like.stride(a) > like.stride(b); });
  std::vector<int64_t> permuted_sizes;
  permuted_sizes.reserve(order.size());
  for (int64_t d : order) permuted_sizes.push_back(sizes[static_cast<std::size_t>(d)]);
  std::vector<int64_t> inverse(order.size());
  for (std::size_t i = 0; i < order.size(); ++i) inverse[static_cast<std::size_t>(order[i])] = static_cast<int64_t>(i);
  return at::empty(permuted_sizes, like.options()).permute(inverse);
}

std::tuple<Tensor, Tensor, Tensor, Tensor> efficient_attention_meta(const Tensor& query, const Tensor& key,
                                                                    const Tensor& value, const std::optional<Tensor>&,
                                                                    bool compute_log_sumexp, double, bool,
                                                                    std::optional<double>) {
  const int64_t batch = query.size(0), heads = query.size(1), seq_q = query.size(2), head_dim_v = value.size(3);
  (void)key;
  Tensor output = empty_bthd({batch, heads, seq_q, head_dim_v}, query.options());
  const int64_t lse_len = compute_log_sumexp ? (seq_q + 31) / 32 * 32 : 0;
  Tensor logsumexp = at::empty({batch, heads, lse_len}, query.options().dtype(at::kFloat));
  return {output, logsumexp, rng_scalar(query, at::kLong), rng_scalar(query, at::kLong)};
}

std::tuple<Tensor, Tensor, Tensor, Tensor> efficient_attention_backward_meta(
    const Tensor&, const Tensor& query, const Tensor& key, const Tensor& value, const Tensor& attn_bias, const Tensor&,
    const Tensor&, const Tensor&, const Tensor&, double, std::array<bool, 4> grad_input_mask, bool,
    std::optional<double>) {
  Tensor grad_bias;
  if (attn_bias.defined() && grad_input_mask[3]) {
    std::vector<int64_t> aligned = attn_bias.sizes().vec();
    const int64_t last = aligned.back();
    aligned.back() = (last + 15) / 16 * 16;
    grad_bias = at::empty(aligned, attn_bias.options()).narrow(-1, 0, last);
  }
  return {empty_bthd(query.sizes(), query.options()), empty_bthd(key.sizes(), key.options()),
          empty_bthd(value.sizes(), value.options()), grad_bias};
}

using FusedAttentionResult =
    std::tuple<Tensor, Tensor, Tensor, Tensor, c10::SymInt, c10::SymInt, Tensor, Tensor, Tensor>;

FusedAttentionResult flash_attention_meta(const Tensor& query, const Tensor& key, const Tensor&, double, bool,
                                          bool return_debug_mask, std::optional<double>) {
  const int64_t batch = query.size(0), heads = query.size(1), seq_q = query.size(2), head_dim = query.size(3);
  const int64_t seq_k = key.size(2);
  Tensor logsumexp = at::empty({batch, heads, seq_q}, query.options().dtype(at::kFloat));
  Tensor debug_mask;
  if (return_debug_mask) {
    const int64_t block = head_dim > 64 ? 128 : 256;
    int64_t max_k = (seq_q + block - 1) / block;
    if (seq_k <= 128)
      max_k = 128;
    else if (seq_k <= 256)
      max_k = 256;
    debug_mask = at::empty({batch, heads, seq_q, max_k}, query.options());
  } else {
    debug_mask = at::empty({0}, query.options());
  }
  return {at::empty_like(query),
          logsumexp,
          Tensor(),
          Tensor(),
          c10::SymInt(seq_q),
          c10::SymInt(seq_k),
          at::empty({2}, query.options().dtype(at::kUInt64)),
          rng_scalar(query, at::kUInt64),
          debug_mask};
}

// The fused attention backwards take SymInts by value, as their schemas' C++ signatures do (a
// kernel's signature must match its op's exactly).
// NOLINTBEGIN(performance-unnecessary-value-param)
std::tuple<Tensor, Tensor, Tensor> flash_attention_backward_meta(const Tensor&, const Tensor& query, const Tensor& key,
                                                                 const Tensor& value, const Tensor&, const Tensor&,
                                                                 const Tensor&, const Tensor&, c10::SymInt, c10::SymInt,
                                                                 double, bool, const Tensor&, const Tensor&,
                                                                 std::optional<double>) {
  return {at::empty_like(query), at::empty_like(key), at::empty_like(value)};
}
// NOLINTEND(performance-unnecessary-value-param)

FusedAttentionResult cudnn_attention_meta(const Tensor& query, const Tensor& key, const Tensor& value,
                                          const std::optional<Tensor>&, bool, double, bool, bool,
                                          std::optional<double>) {
  const int64_t batch = query.size(0), heads = query.size(1), seq_q = query.size(2), seq_k = key.size(2);
  return {empty_matching_layout(query, {batch, heads, seq_q, value.size(3)}),
          at::empty({batch, heads, seq_q, 1}, query.options().dtype(at::kFloat)),
          Tensor(),
          Tensor(),
          c10::SymInt(seq_q),
          c10::SymInt(seq_k),
          rng_scalar(query, at::kLong),
          rng_scalar(query, at::kLong),
          Tensor()};
}

// NOLINTBEGIN(performance-unnecessary-value-param): SymInts by value, as above
std::tuple<Tensor, Tensor, Tensor> cudnn_attention_backward_meta(const Tensor&, const Tensor& query, const Tensor& key,
                                                                 const Tensor& value, const Tensor&, const Tensor&,
                                                                 const Tensor&, const Tensor&, const Tensor&,
                                                                 const Tensor&, const Tensor&, c10::SymInt, c10::SymInt,
                                                                 double, bool, std::optional<double>) {
  return {at::empty_like(query), at::empty_like(key), at::empty_like(value)};
}
// NOLINTEND(performance-unnecessary-value-param)

}  // namespace

void register_attention_meta(MetaRegistrar& m) {
  m.impl("_scaled_dot_product_flash_attention_for_cpu", TORCH_FN(flash_attention_for_cpu_meta));
  m.impl("_scaled_dot_product_flash_attention_for_cpu_backward", TORCH_FN(flash_attention_for_cpu_backward_meta));
  m.impl("_scaled_dot_product_efficient_attention", TORCH_FN(efficient_attention_meta));
  m.impl("_scaled_dot_product_efficient_attention_backward", TORCH_FN(efficient_attention_backward_meta));
  m.impl("_scaled_dot_product_flash_attention", TORCH_FN(flash_attention_meta));
  m.impl("_scaled_dot_product_flash_attention_backward", TORCH_FN(flash_attention_backward_meta));
  m.impl("_scaled_dot_product_cudnn_attention", TORCH_FN(cudnn_attention_meta));
  m.impl("_scaled_dot_product_cudnn_attention_backward", TORCH_FN(cudnn_attention_backward_meta));
}

}  // namespace aotpipe::detail
