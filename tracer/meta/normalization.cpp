// Meta kernels of batch, layer, group and weight normalization and their backwards, as the CPU kernels
// allocate: outputs in the input's suggested memory format (layer norm: contiguous), statistics
// [C], [M...,1...] or [N, groups] in the parameter dtype (float for a Half/BFloat16 input with
// float parameters: the "mixed type" case).
#include <aotpipe/tracer/internal/meta_support.h>

#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like.h>
#include <ATen/ops/empty_strided.h>

namespace aotpipe::detail {
namespace {

using at::IntArrayRef;
using at::Tensor;
using OptTensor = std::optional<Tensor>;

bool defined(const OptTensor& t) { return t && t->defined(); }

// ATen's is_mixed_type: a reduced-precision input with float parameters.
bool is_mixed_type(const Tensor& input, std::initializer_list<const OptTensor*> params) {
  if (!at::isReducedFloatingType(input.scalar_type())) return false;
  bool mixed = false;
  for (const OptTensor* p : params)
    if (defined(*p)) {
      mixed = (*p)->scalar_type() == at::kFloat;
      if (!mixed) break;
    }
  return mixed;
}

at::ScalarType param_dtype(const Tensor& input, bool mixed) { return mixed ? at::kFloat : input.scalar_type(); }

void check_channel_param(const OptTensor& t, int64_t channels, const char* what) {
  if (defined(t)) TORCH_CHECK(t->numel() == channels, what, " should contain ", channels, " elements not ", t->numel());
}

// ---- batch norm --------------------------------------------------------------------------------

std::tuple<Tensor, Tensor, Tensor> batch_norm_impl(const Tensor& input, const OptTensor& weight, const OptTensor& bias,
                                                   const OptTensor& running_mean, const OptTensor& running_var,
                                                   bool training) {
  TORCH_CHECK(input.dim() >= 2, "batch_norm: expected 2D or more input (got ", input.dim(), "D input)");
  const int64_t channels = input.size(1);
  check_channel_param(weight, channels, "weight");
  check_channel_param(bias, channels, "bias");
  check_channel_param(running_mean, channels, "running_mean");
  check_channel_param(running_var, channels, "running_var");
  TORCH_CHECK(training || (defined(running_mean) && defined(running_var)),
              "batch_norm: running_mean and running_var must be defined in evaluation mode");
  const bool mixed = is_mixed_type(input, {&weight, &bias, &running_mean, &running_var});
  const auto options = input.options().dtype(param_dtype(input, mixed));
  Tensor output = at::empty_like(input, input.suggest_memory_format());
  if (!training) return {output, at::empty({0}, options), at::empty({0}, options)};
  return {output, at::empty({channels}, options), at::empty({channels}, options)};
}

std::tuple<Tensor, Tensor, Tensor> native_batch_norm_meta(const Tensor& input, const OptTensor& weight,
                                                          const OptTensor& bias, const OptTensor& running_mean,
                                                          const OptTensor& running_var, bool training, double, double) {
  return batch_norm_impl(input, weight, bias, running_mean, running_var, training);
}

std::tuple<Tensor, Tensor, Tensor> batch_norm_legit_meta(const Tensor& input, const OptTensor& weight,
                                                         const OptTensor& bias, Tensor& running_mean,
                                                         Tensor& running_var, bool training, double, double) {
  return batch_norm_impl(input, weight, bias, running_mean, running_var, training);
}

std::tuple<Tensor, Tensor, Tensor> batch_norm_legit_no_stats_meta(const Tensor& input, const OptTensor& weight,
                                                                  const OptTensor& bias, bool training, double,
                                                                  double) {
  return batch_norm_impl(input, weight, bias, std::nullopt, std::nullopt, training);
}

std::tuple<Tensor, Tensor, Tensor> batch_norm_legit_no_training_meta(const Tensor& input, const OptTensor& weight,
                                                                     const OptTensor& bias, const Tensor& running_mean,
                                                                     const Tensor& running_var, double, double) {
  return batch_norm_impl(input, weight, bias, running_mean, running_var, /*training=*/false);
}

std::tuple<Tensor, Tensor, Tensor> native_batch_norm_backward_meta(
    const Tensor& grad_out, const Tensor& input, const OptTensor& weight, const OptTensor& running_mean,
    const OptTensor& running_var, const OptTensor& save_mean, const OptTensor& save_invstd, bool, double,
    std::array<bool, 3> output_mask) {
  TORCH_CHECK(grad_out.sizes() == input.sizes(), "batch_norm_backward: grad_out of sizes ", grad_out.sizes(),
              " does not match input of sizes ", input.sizes());
  const int64_t channels = input.size(1);
  const bool mixed = is_mixed_type(input, {&weight, &running_mean, &running_var, &save_mean, &save_invstd});
  const auto options = input.options().dtype(param_dtype(input, mixed));
  Tensor grad_input, grad_weight, grad_bias;
  if (output_mask[0]) grad_input = at::empty_like(input, input.suggest_memory_format());
  if (output_mask[1])
    grad_weight =
        defined(weight) ? at::empty_like(*weight, at::MemoryFormat::Contiguous) : at::empty({channels}, options);
  if (output_mask[2])
    grad_bias =
        defined(weight) ? at::empty_like(*weight, at::MemoryFormat::Contiguous) : at::empty({channels}, options);
  return {grad_input, grad_weight, grad_bias};
}

// ---- layer norm --------------------------------------------------------------------------------

// (M, N) as _check_layer_norm_inputs computes them.
std::pair<int64_t, int64_t> layer_norm_rows(const Tensor& input, IntArrayRef normalized_shape, const OptTensor& weight,
                                            const OptTensor& bias) {
  const int64_t normalized_ndim = static_cast<int64_t>(normalized_shape.size());
  TORCH_CHECK(normalized_ndim >= 1,
              "Expected normalized_shape to be at least 1-dimensional, i.e., containing at "
              "least one element, but got normalized_shape = ",
              normalized_shape);
  TORCH_CHECK(!defined(weight) || weight->sizes() == normalized_shape,
              "Expected weight to be of same shape as "
              "normalized_shape, but got weight of shape ",
              weight ? weight->sizes() : IntArrayRef{}, " and normalized_shape = ", normalized_shape);
  TORCH_CHECK(!defined(bias) || bias->sizes() == normalized_shape,
              "Expected bias to be of same shape as "
              "normalized_shape, but got bias of shape ",
              bias ? bias->sizes() : IntArrayRef{}, " and normalized_shape = ", normalized_shape);
  const auto input_shape = input.sizes();
  const int64_t input_ndim = input.dim();
  TORCH_CHECK(input_ndim >= normalized_ndim && input_shape.slice(input_ndim - normalized_ndim).equals(normalized_shape),
              "Given normalized_shape=", normalized_shape, ", expected input with shape [*, ", normalized_shape,
              "], but got input of size", input_shape);
  const int64_t axis = input_ndim - normalized_ndim;
  int64_t m = 1, n = 1;
  for (int64_t d = 0; d < input_ndim; ++d) (d < axis ? m : n) *= input_shape[d];
  return {m, n};
}

std::vector<int64_t> layer_norm_stat_shape(const Tensor& input, IntArrayRef normalized_shape) {
  const int64_t axis = input.dim() - static_cast<int64_t>(normalized_shape.size());
  std::vector<int64_t> shape(input.sizes().begin(), input.sizes().begin() + axis);
  shape.resize(input.dim(), 1);
  return shape;
}

std::tuple<Tensor, Tensor, Tensor> native_layer_norm_meta(const Tensor& input, IntArrayRef normalized_shape,
                                                          const OptTensor& weight, const OptTensor& bias, double) {
  layer_norm_rows(input, normalized_shape, weight, bias);
  const bool mixed = is_mixed_type(input, {&weight, &bias});
  const auto stats = input.options().dtype(param_dtype(input, mixed));
  const auto shape = layer_norm_stat_shape(input, normalized_shape);
  return {at::empty_like(input, at::MemoryFormat::Contiguous), at::empty(shape, stats), at::empty(shape, stats)};
}

std::tuple<Tensor, Tensor, Tensor> native_layer_norm_backward_meta(const Tensor& grad_out, const Tensor& input,
                                                                   IntArrayRef normalized_shape, const Tensor&,
                                                                   const Tensor&, const OptTensor& weight,
                                                                   const OptTensor& bias,
                                                                   std::array<bool, 3> output_mask) {
  layer_norm_rows(input, normalized_shape, weight, bias);
  TORCH_CHECK(grad_out.sizes() == input.sizes(), "layer_norm_backward: grad_out of sizes ", grad_out.sizes(),
              " does not match input of sizes ", input.sizes());
  Tensor grad_input, grad_weight, grad_bias;
  if (output_mask[0]) grad_input = at::empty_like(input, at::MemoryFormat::Contiguous);
  if (output_mask[1] && defined(weight)) grad_weight = at::empty_like(*weight, at::MemoryFormat::Contiguous);
  if (output_mask[2] && defined(bias)) grad_bias = at::empty_like(*bias, at::MemoryFormat::Contiguous);
  return {grad_input, grad_weight, grad_bias};
}

// ---- group norm --------------------------------------------------------------------------------

void check_group_norm(const Tensor& input, const OptTensor& weight, const OptTensor& bias, int64_t n, int64_t c,
                      int64_t hxw, int64_t group) {
  TORCH_CHECK(group > 0 && c % group == 0,
              "Expected number of channels in input to be divisible by num_groups, but got "
              "input of shape ",
              input.sizes(), " and num_groups=", group);
  TORCH_CHECK(input.numel() == n * c * hxw, "Expected the input to have ", n * c * hxw, " elements, got ",
              input.numel());
  check_channel_param(weight, c, "weight");
  check_channel_param(bias, c, "bias");
  TORCH_CHECK(input.is_contiguous(input.suggest_memory_format()),
              "Expected X.is_contiguous(memory_format) to be true, "
              "but got false.");
}

std::tuple<Tensor, Tensor, Tensor> native_group_norm_meta(const Tensor& input, const OptTensor& weight,
                                                          const OptTensor& bias, int64_t n, int64_t c, int64_t hxw,
                                                          int64_t group, double) {
  check_group_norm(input, weight, bias, n, c, hxw, group);
  const bool mixed = is_mixed_type(input, {&weight, &bias});
  const auto stats = input.options().dtype(param_dtype(input, mixed));
  return {at::empty_like(input, input.suggest_memory_format()), at::empty({n, group}, stats),
          at::empty({n, group}, stats)};
}

std::tuple<Tensor, Tensor, Tensor> native_group_norm_backward_meta(const Tensor& grad_out, const Tensor& input,
                                                                   const Tensor& mean, const Tensor&,
                                                                   const OptTensor& weight, int64_t n, int64_t c,
                                                                   int64_t hxw, int64_t group,
                                                                   std::array<bool, 3> output_mask) {
  check_group_norm(input, weight, std::nullopt, n, c, hxw, group);
  TORCH_CHECK(grad_out.sizes() == input.sizes(), "group_norm_backward: grad_out of sizes ", grad_out.sizes(),
              " does not match input of sizes ", input.sizes());
  Tensor grad_input, grad_weight, grad_bias;
  if (output_mask[0]) grad_input = at::empty_like(input, input.suggest_memory_format());
  const auto param_options = defined(weight) ? weight->options() : mean.options();
  if (output_mask[1]) grad_weight = at::empty({c}, param_options);
  if (output_mask[2]) grad_bias = at::empty({c}, param_options);
  return {grad_input, grad_weight, grad_bias};
}

// ---- weight norm ------------------------------------------------------------------------------
// The fused kernel _weight_norm picks when `dim` is the first or last (torch.nn.utils.weight_norm
// and parametrizations.weight_norm; Wav2Vec2's positional convolution): w contiguous, the norms
// in g's sizes and strides, in float for a bfloat16 g (WeightNorm.cpp; PyTorch's decomposition).
std::tuple<Tensor, Tensor> weight_norm_interface_meta(const Tensor& v, const Tensor& g, int64_t dim) {
  TORCH_CHECK(v.dim() > 0 && (dim == 0 || dim == v.dim() - 1), "_weight_norm_interface: dim ", dim,
              " is neither the first nor the last of v's ", v.dim(), " dimensions");
  const at::ScalarType norm_dtype = g.scalar_type() == at::kBFloat16 ? at::kFloat : g.scalar_type();
  return {at::empty_like(v, at::MemoryFormat::Contiguous),
          at::empty_strided(g.sizes(), g.strides(), g.options().dtype(norm_dtype))};
}

std::tuple<Tensor, Tensor> weight_norm_interface_backward_meta(const Tensor& grad_w, const Tensor& saved_v,
                                                               const Tensor& saved_g, const Tensor& saved_norms,
                                                               int64_t /*dim*/) {
  TORCH_CHECK(grad_w.sizes() == saved_v.sizes(), "_weight_norm_interface_backward: grad_w ", grad_w.sizes(),
              " and saved_v ", saved_v.sizes(), " differ");
  TORCH_CHECK(saved_v.is_contiguous(), "saved_v must be contiguous");
  TORCH_CHECK(saved_g.is_contiguous(), "saved_g must be contiguous");
  TORCH_CHECK(saved_norms.is_contiguous(), "saved_norm must be contiguous");
  return {at::empty_like(saved_v, at::MemoryFormat::Contiguous), at::empty_like(saved_g, at::MemoryFormat::Contiguous)};
}

}  // namespace

void register_normalization_meta(MetaRegistrar& m) {
  m.impl("native_batch_norm", TORCH_FN(native_batch_norm_meta));
  m.impl("_native_batch_norm_legit", TORCH_FN(batch_norm_legit_meta));
  m.impl("_native_batch_norm_legit.no_stats", TORCH_FN(batch_norm_legit_no_stats_meta));
  m.impl("_native_batch_norm_legit_no_training", TORCH_FN(batch_norm_legit_no_training_meta));
  m.impl("native_batch_norm_backward", TORCH_FN(native_batch_norm_backward_meta));
  m.impl("native_layer_norm", TORCH_FN(native_layer_norm_meta));
  m.impl("native_layer_norm_backward", TORCH_FN(native_layer_norm_backward_meta));
  m.impl("native_group_norm", TORCH_FN(native_group_norm_meta));
  m.impl("native_group_norm_backward", TORCH_FN(native_group_norm_backward_meta));
  m.impl("_weight_norm_interface", TORCH_FN(weight_norm_interface_meta));
  m.impl("_weight_norm_interface_backward", TORCH_FN(weight_norm_interface_backward_meta));
}

}  // namespace aotpipe::detail
