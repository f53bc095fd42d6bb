// Meta kernels of the FFT primitives (_fft_c2c, _fft_r2c, _fft_c2r: what every torch.fft function
// lowers to). The result's strides are the FFT library's: it writes a [batch, signal...] block
// with the batch dimensions ordered by the input's strides, then restrides the result back to the
// input's dimension order (_exec_fft in ATen's mkl/ and cuda/SpectralOps.cpp). On the CPU
// (MKL) every primitive ends in that one transform; for CUDA the r2c and c2r layouts follow
// cuFFT's multi-pass paths as PyTorch's own meta registrations (torch/_meta_registrations.py) do.
#include <aotpipe/tracer/internal/meta_kernels.h>
#include <aotpipe/tracer/internal/meta_support.h>

#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like.h>
#include <c10/core/ScalarType.h>

#include <algorithm>
#include <numeric>

namespace aotpipe::detail {
namespace {

using at::IntArrayRef;
using at::Tensor;
using Dims = std::vector<int64_t>;

constexpr std::size_t kCufftMaxDims = 3;

bool for_cuda() { return meta_device_hint().is_cuda(); }

// `dim` ordered by decreasing stride of `self` (the last one kept in place when exclude_last: a
// one-sided transform's halved dimension must be transformed last).
Dims sort_dims(const Tensor& self, IntArrayRef dim, bool exclude_last = false) {
  Dims sorted(dim.begin(), dim.end());
  const auto strides = self.strides();
  std::sort(sorted.begin(), sorted.end() - (exclude_last ? 1 : 0),
            [&](int64_t a, int64_t b) { return strides[a] > strides[b]; });
  return sorted;
}

// What _exec_fft leaves in `out`: a contiguous [batch, out_sizes[dim]...] block over the batch
// dimensions (in decreasing input stride) and the transformed ones (in `dim` order), viewed back
// as out_sizes.
Tensor exec_fft(const Tensor& out, const Tensor& self, IntArrayRef out_sizes, IntArrayRef dim) {
  const int64_t ndim = self.dim();
  const auto signal_ndim = static_cast<int64_t>(dim.size());
  const int64_t batch_dims = ndim - signal_ndim;
  std::vector<bool> transformed(static_cast<std::size_t>(ndim), false);
  for (int64_t d : dim) transformed[static_cast<std::size_t>(d)] = true;
  Dims permute;
  for (int64_t d = 0; d < ndim; ++d)
    if (!transformed[static_cast<std::size_t>(d)]) permute.push_back(d);
  const auto strides = self.strides();
  std::stable_sort(permute.begin(), permute.end(), [&](int64_t a, int64_t b) { return strides[a] > strides[b]; });
  permute.insert(permute.end(), dim.begin(), dim.end());
  // The batch collapses by reshape, as the kernel's does (and fails as it does).
  Dims batched{-1};
  const Tensor permuted = self.permute(permute);
  batched.insert(batched.end(), permuted.sizes().begin() + batch_dims, permuted.sizes().end());
  const int64_t batch = permuted.reshape(batched).size(0);
  Dims batched_out{batch};
  for (int64_t d : dim) batched_out.push_back(out_sizes[static_cast<std::size_t>(d)]);
  out.resize_(batched_out, at::MemoryFormat::Contiguous);
  Dims out_strides(static_cast<std::size_t>(ndim));
  int64_t batch_numel = 1;
  for (int64_t i = batch_dims - 1; i >= 0; --i) {
    const auto d = static_cast<std::size_t>(permute[static_cast<std::size_t>(i)]);
    out_strides[d] = batch_numel * out.stride(0);
    batch_numel *= out_sizes[d];
  }
  for (int64_t i = batch_dims; i < ndim; ++i)
    out_strides[static_cast<std::size_t>(permute[static_cast<std::size_t>(i)])] = out.stride(1 + (i - batch_dims));
  return out.as_strided_(out_sizes, out_strides, out.storage_offset());
}

// cuFFT's c2c passes over `dims` of `working`: at most three dimensions each, the last ones of
// `dims` sorted on the pass's input strides (_fft_c2c_cufft; the r2c path's passes after its first).
Tensor cufft_c2c_passes(Tensor working, Dims dims, IntArrayRef sizes, const at::TensorOptions& options) {
  for (;;) {
    dims = sort_dims(working, dims);
    const std::size_t pass = std::min(kCufftMaxDims, dims.size());
    Tensor output =
        exec_fft(at::empty(sizes, options), working, sizes, IntArrayRef(dims).slice(dims.size() - pass, pass));
    dims.resize(dims.size() - pass);
    if (dims.empty()) return output;
    working = std::move(output);
  }
}

Tensor fft_c2c_meta(const Tensor& self, IntArrayRef dim, int64_t, bool) {
  TORCH_CHECK(self.is_complex(), "_fft_c2c: expected a complex input, got ", self.scalar_type());
  if (dim.empty()) return at::empty_like(self);
  if (!for_cuda()) return exec_fft(at::empty(self.sizes(), self.options()), self, self.sizes(), sort_dims(self, dim));
  return cufft_c2c_passes(self, Dims(dim.begin(), dim.end()), self.sizes(), self.options());
}

bool optimized_cufft_path(IntArrayRef dim) {
  return !(dim.size() > kCufftMaxDims || (dim.size() >= 2 && dim[0] == 0 && dim[1] == 1));
}

Tensor fft_r2c_meta(const Tensor& self, IntArrayRef dim, int64_t, bool onesided) {
  TORCH_CHECK(self.is_floating_point(), "_fft_r2c: expected a real floating input, got ", self.scalar_type());
  TORCH_CHECK(!dim.empty(), "_fft_r2c: expected at least one dimension");
  const auto complex = self.options().dtype(c10::toComplexType(self.scalar_type()));
  const int64_t last = dim.back();
  Dims out_sizes(self.sizes().begin(), self.sizes().end());
  Dims onesided_sizes = out_sizes;
  onesided_sizes[static_cast<std::size_t>(last)] = self.size(last) / 2 + 1;
  if (onesided) out_sizes = onesided_sizes;
  if (!for_cuda()) return exec_fft(at::empty(out_sizes, complex), self, out_sizes, sort_dims(self, dim, true));
  if (optimized_cufft_path(dim)) return exec_fft(at::empty(out_sizes, complex), self, out_sizes, dim);
  // r2c on the last dimension, then c2c passes over the others.
  const IntArrayRef first_sizes = dim.size() == 1 ? IntArrayRef(out_sizes) : IntArrayRef(onesided_sizes);
  Tensor output = exec_fft(at::empty(first_sizes, complex), self, first_sizes, {last});
  if (dim.size() > 1) output = cufft_c2c_passes(output, Dims(dim.begin(), dim.end() - 1), onesided_sizes, complex);
  // Two-sided: the one-sided result is copied into a contiguous tensor of the full size.
  if (!onesided && output.size(last) != out_sizes[static_cast<std::size_t>(last)]) return at::empty(out_sizes, complex);
  return output;
}

Tensor fft_c2r_meta(const Tensor& self, IntArrayRef dim, int64_t normalization, int64_t last_dim_size) {
  TORCH_CHECK(self.is_complex(), "_fft_c2r: expected a complex input, got ", self.scalar_type());
  TORCH_CHECK(!dim.empty(), "_fft_c2r: expected at least one dimension");
  const auto real = self.options().dtype(c10::toRealValueType(self.scalar_type()));
  Dims out_sizes(self.sizes().begin(), self.sizes().end());
  out_sizes[static_cast<std::size_t>(dim.back())] = last_dim_size;
  // Several dimensions: c2c on all but the last, then c2r on the last (cuFFT: all at once when it
  // can, on a contiguous copy of the input).
  auto leading_c2c = [&] { return fft_c2c_meta(self, dim.slice(0, dim.size() - 1), normalization, false); };
  if (for_cuda()) {
    const Tensor contiguous = at::empty(self.sizes(), self.options());
    if (optimized_cufft_path(dim)) return exec_fft(at::empty(out_sizes, real), contiguous, out_sizes, dim);
    return exec_fft(at::empty(out_sizes, real), dim.size() > 1 ? leading_c2c() : contiguous, out_sizes, {dim.back()});
  }
  return exec_fft(at::empty(out_sizes, real), dim.size() > 1 ? leading_c2c() : self, out_sizes, {dim.back()});
}

}  // namespace

void register_spectral_meta(MetaRegistrar& m) {
  m.impl("_fft_c2c", TORCH_FN(fft_c2c_meta));
  m.impl("_fft_r2c", TORCH_FN(fft_r2c_meta));
  m.impl("_fft_c2r", TORCH_FN(fft_c2r_meta));
}

}  // namespace aotpipe::detail
