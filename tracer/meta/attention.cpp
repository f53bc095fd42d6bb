// Meta kernels of the CPU flash attention that scaled_dot_product_attention picks on the CPU:
// the output is laid out [B, T, H, D] in memory (a transposed view of [B, H, T, D]), the
// logsumexp is float [B, H, T] over a [B, T, H] buffer, and the gradients are [B, T, H, D] in
// memory like the output.
#include <aotpipe/tracer/internal/meta_support.h>

#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like.h>

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

}  // namespace

void register_attention_meta(MetaRegistrar& m) {
  m.impl("_scaled_dot_product_flash_attention_for_cpu", TORCH_FN(flash_attention_for_cpu_meta));
  m.impl("_scaled_dot_product_flash_attention_for_cpu_backward", TORCH_FN(flash_attention_for_cpu_backward_meta));
}

}  // namespace aotpipe::detail
