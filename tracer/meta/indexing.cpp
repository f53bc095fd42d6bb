// Meta kernels of index_select and the embedding ops (embedding itself is a composite of
// index_select; its backward and embedding_bag have CPU kernels only).
#include <aotpipe/tracer/internal/meta_kernels.h>
#include <aotpipe/tracer/internal/meta_support.h>

#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like.h>
#include <ATen/WrapDimUtils.h>

namespace aotpipe::detail {
namespace {

using at::Tensor;

constexpr int64_t kModeSum = 0, kModeMean = 1, kModeMax = 2;

void check_index_dtype(const Tensor& index, const char* op, const char* what) {
  TORCH_CHECK(index.scalar_type() == at::kLong || index.scalar_type() == at::kInt, op,
              "(): Expected dtype int32 or int64 for ", what, ", got ", index.scalar_type());
}

Tensor index_select_meta(const Tensor& self, int64_t dim, const Tensor& index) {
  dim = at::maybe_wrap_dim(dim, self.dim());
  TORCH_CHECK(index.dim() <= 1, "index_select(): Index is supposed to be a vector");
  TORCH_CHECK(!(self.dim() == 0 && index.numel() != 1), "index_select(): Index to scalar can have only 1 value, got ",
              index.numel(), " value(s)");
  check_index_dtype(index, "index_select", "index");
  std::vector<int64_t> sizes = self.sizes().vec();
  if (self.dim() > 0) sizes[dim] = index.numel();
  return at::empty(sizes, self.options());
}

Tensor embedding_dense_backward_meta(const Tensor& grad_output, const Tensor& indices, int64_t num_weights, int64_t,
                                     bool) {
  check_index_dtype(indices, "embedding_backward", "indices");
  return at::empty({num_weights, grad_output.size(-1)}, grad_output.options());
}

// _embedding_bag's four outputs on the CPU (EmbeddingBag.cpp: the fast sum path over float/half
// rows skips offset2bag).
std::tuple<Tensor, Tensor, Tensor, Tensor> embedding_bag_meta(const Tensor& weight, const Tensor& indices,
                                                              const Tensor& offsets, bool, int64_t mode, bool,
                                                              const std::optional<Tensor>& per_sample_weights,
                                                              bool include_last_offset, int64_t padding_idx) {
  check_index_dtype(indices, "embedding_bag", "indices");
  check_index_dtype(offsets, "embedding_bag", "offsets");
  TORCH_CHECK(at::isFloatingType(weight.scalar_type()),
              "embedding_bag: expected weight to be floating point type, got ", weight.scalar_type());
  TORCH_CHECK(weight.dim() == 2, "embedding_bag: weight has to be a 2D Tensor, but got Tensor of dimension ",
              weight.dim());
  int64_t num_bags = offsets.size(0);
  if (include_last_offset) {
    TORCH_CHECK(num_bags >= 1, "include_last_offset: numBags should be at least 1");
    num_bags -= 1;
  }
  const bool has_weights = per_sample_weights && per_sample_weights->defined();
  if (has_weights) {
    TORCH_CHECK(mode == kModeSum, "embedding_bag: per_sample_weights only supported with mode='sum'");
    TORCH_CHECK(per_sample_weights->dim() == 1, "embedding_bag: expected per_sample_weights to be 1D tensor, got ",
                per_sample_weights->dim(), "D");
    TORCH_CHECK(per_sample_weights->numel() == indices.numel(), "embedding_bag: expected per_sample_weights.numel() (",
                per_sample_weights->numel(), ") to be the same as indices.numel() (", indices.numel(), ")");
  }
  Tensor output = at::empty({num_bags, weight.size(1)}, weight.options());
  if (meta_device_hint().is_cuda()) {
    Tensor max_indices =
        mode == kModeMax ? at::empty({num_bags, weight.size(1)}, indices.options()) : at::empty({0}, indices.options());
    return {output, at::empty({indices.size(0)}, indices.options()), at::empty(offsets.sizes(), indices.options()),
            max_indices};
  }
  const bool fast_index_select = (weight.scalar_type() == at::kFloat || weight.scalar_type() == at::kHalf) &&
                                 weight.stride(1) == 1 && output.stride(1) == 1 && padding_idx < 0;
  const bool fast_path = fast_index_select && (!has_weights || per_sample_weights->stride(0) == 1);
  Tensor offset2bag = (mode == kModeMean || mode == kModeMax || !fast_path)
                          ? at::empty({indices.size(0)}, offsets.options())
                          : at::empty({0}, offsets.options());
  Tensor bag_size = at::empty({num_bags}, offsets.options());
  Tensor max_indices = mode == kModeMax ? at::empty({num_bags, weight.size(1)}, offsets.options())
                                        : at::empty(bag_size.sizes(), offsets.options());
  return {output, offset2bag, bag_size, max_indices};
}

std::tuple<Tensor, Tensor, Tensor, Tensor> embedding_bag_forward_only_meta(
    const Tensor& weight, const Tensor& indices, const Tensor& offsets, bool scale_grad_by_freq, int64_t mode,
    bool sparse, const std::optional<Tensor>& per_sample_weights, bool include_last_offset, int64_t padding_idx) {
  auto result = embedding_bag_meta(weight, indices, offsets, scale_grad_by_freq, mode, sparse, per_sample_weights,
                                   include_last_offset, padding_idx);
  // The CPU's forward-only kernel in sum mode sizes bag_size (and so max_indices) like the offsets.
  if (!meta_device_hint().is_cuda() && mode == kModeSum) {
    std::get<2>(result) = at::empty(offsets.sizes(), offsets.options());
    std::get<3>(result) = at::empty(offsets.sizes(), offsets.options());
  }
  return result;
}

Tensor embedding_bag_dense_backward_meta(const Tensor& grad, const Tensor&, const Tensor&, const Tensor&,
                                         const Tensor& maximum_indices, int64_t num_weights, bool, int64_t mode,
                                         const std::optional<Tensor>&, int64_t) {
  TORCH_CHECK(grad.scalar_type() == at::kHalf || grad.scalar_type() == at::kBFloat16 ||
                  grad.scalar_type() == at::kFloat || grad.scalar_type() == at::kDouble,
              "Unsupported input type encountered: ", grad.scalar_type());
  TORCH_CHECK(mode != kModeMax || maximum_indices.defined(),
              "embedding_bag backward in max mode needs the max indices");
  return at::empty({num_weights, grad.size(1)}, grad.options());
}

Tensor embedding_bag_backward_meta(const Tensor& grad, const Tensor& indices, const Tensor& offsets,
                                   const Tensor& offset2bag, const Tensor& bag_size, const Tensor& maximum_indices,
                                   int64_t num_weights, bool scale_grad_by_freq, int64_t mode, bool sparse,
                                   const std::optional<Tensor>& per_sample_weights, int64_t padding_idx) {
  TORCH_CHECK(!sparse, "aotpipe's Meta kernel of _embedding_bag_backward covers dense gradients only");
  (void)offsets;
  return embedding_bag_dense_backward_meta(grad, indices, offset2bag, bag_size, maximum_indices, num_weights,
                                           scale_grad_by_freq, mode, per_sample_weights, padding_idx);
}

}  // namespace

void register_indexing_meta(MetaRegistrar& m) {
  m.impl("index_select", TORCH_FN(index_select_meta));
  m.impl("embedding_dense_backward", TORCH_FN(embedding_dense_backward_meta));
  m.impl("_embedding_bag", TORCH_FN(embedding_bag_meta));
  m.impl("_embedding_bag_forward_only", TORCH_FN(embedding_bag_forward_only_meta));
  m.impl("_embedding_bag_dense_backward", TORCH_FN(embedding_bag_dense_backward_meta));
  m.impl("_embedding_bag_backward", TORCH_FN(embedding_bag_backward_meta));
}

}  // namespace aotpipe::detail
