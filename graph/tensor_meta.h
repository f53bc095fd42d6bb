#pragma once
// TensorMeta: what the compiler knows about a tensor value without its data.
#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>
#include <c10/util/ArrayRef.h>
#include <c10/util/SmallVector.h>

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <type_traits>
#include <iosfwd>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace at {
class Tensor;
}

namespace aotpipe {

// Sizes or strides: up to six of them in place (every value of a traced graph has both,
// and two heap blocks per value were a tenth of a trace's allocations). Converts from and to
// std::vector<int64_t> and IntArrayRef, so code written for vectors keeps working.
class Dims : public c10::SmallVector<int64_t, 6> {
  using Base = c10::SmallVector<int64_t, 6>;

 public:
  Dims() = default;
  Dims(std::initializer_list<int64_t> values) : Base(values) {}
  Dims(c10::IntArrayRef values) : Base(values.begin(), values.end()) {}             // NOLINT: implicit
  Dims(const std::vector<int64_t>& values) : Base(values.begin(), values.end()) {}  // NOLINT: implicit
  template <class It, class = std::enable_if_t<!std::is_integral_v<It>>>
  Dims(It first, It last) : Base(first, last) {}
  explicit Dims(std::size_t n, int64_t value = 0) : Base(n, value) {}
  operator std::vector<int64_t>() const { return vec(); }  // NOLINT: implicit
  std::vector<int64_t> vec() const { return {begin(), end()}; }
  friend bool operator==(const Dims& a, const Dims& b) { return std::equal(a.begin(), a.end(), b.begin(), b.end()); }
  friend bool operator==(const Dims& a, const std::vector<int64_t>& b) {
    return std::equal(a.begin(), a.end(), b.begin(), b.end());
  }
};

struct TensorMeta {
  Dims sizes;
  Dims strides;
  int64_t storage_offset = 0;
  c10::ScalarType dtype = c10::ScalarType::Float;
  c10::Device device = c10::Device(c10::kCPU);
  bool requires_grad = false;

  // Reads the metadata of a real, meta or fake tensor.
  static TensorMeta of(const at::Tensor& tensor);
  // A contiguous tensor of the given sizes.
  static TensorMeta contiguous(Dims sizes, c10::ScalarType dtype = c10::ScalarType::Float,
                               c10::Device device = c10::Device(c10::kCPU), bool requires_grad = false);

  int64_t numel() const;
  // Bytes this view spans (numel * element size); what the partitioner counts when saving it.
  int64_t nbytes() const;
  bool is_contiguous() const;
  // The same memory layout: dtype, sizes, strides and storage offset (not device or requires_grad).
  bool same_layout(const TensorMeta& other) const {
    return dtype == other.dtype && sizes == other.sizes && strides == other.strides &&
           storage_offset == other.storage_offset;
  }
  bool operator==(const TensorMeta&) const = default;
};

Dims contiguous_strides(c10::IntArrayRef sizes);
// The exact match for Dims, over c10::contiguous_strides (which argument-dependent lookup finds
// for them too, Dims being a c10::SmallVector).
inline Dims contiguous_strides(const Dims& sizes) { return aotpipe::contiguous_strides(c10::IntArrayRef(sizes)); }

// Short dtype names as in FX's printed graphs: f32, f64, f16, bf16, i64, i32, i16, i8, u8, b8,
// c64, c128; other dtypes use c10's own name (e.g. Float8_e4m3fn).
std::string dtype_short_name(c10::ScalarType dtype);
std::optional<c10::ScalarType> dtype_from_short_name(std::string_view name);
// "torch.float32" style names, used for ScalarType arguments in the text form.
std::string dtype_torch_name(c10::ScalarType dtype);
std::optional<c10::ScalarType> dtype_from_torch_name(std::string_view name);

// The text form of a tensor type: `f32[4, 8]` plus, only where they differ from the default,
// ` stride=[1, 4] offset=2 device=cuda:0 requires_grad`.
std::string to_string(const TensorMeta& meta);
// to_string(meta) appended to `out` (the printer writes graphs into one buffer).
void append_to(std::string& out, const TensorMeta& meta);
std::ostream& operator<<(std::ostream& os, const TensorMeta& meta);

}  // namespace aotpipe
