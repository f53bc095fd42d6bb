#include <aotpipe/graph/tensor_meta.h>
#include <aotpipe/graph/text_format.h>

#include <ATen/core/Tensor.h>

#include <algorithm>
#include <array>
#include <ostream>
#include <utility>

namespace aotpipe {

TensorMeta TensorMeta::of(const at::Tensor& tensor) {
  TensorMeta meta;
  meta.sizes = tensor.sizes();
  meta.strides = tensor.strides();
  meta.storage_offset = tensor.storage_offset();
  meta.dtype = tensor.scalar_type();
  meta.device = tensor.device();
  meta.requires_grad = tensor.requires_grad();
  return meta;
}

Dims contiguous_strides(c10::IntArrayRef sizes) {
  Dims strides(sizes.size());
  int64_t running = 1;
  for (std::size_t i = sizes.size(); i-- > 0;) {
    strides[i] = running;
    running *= std::max<int64_t>(sizes[i], 1);
  }
  return strides;
}

TensorMeta TensorMeta::contiguous(Dims sizes, c10::ScalarType dtype, c10::Device device, bool requires_grad) {
  TensorMeta meta;
  meta.strides = contiguous_strides(sizes);
  meta.sizes = std::move(sizes);
  meta.dtype = dtype;
  meta.device = device;
  meta.requires_grad = requires_grad;
  return meta;
}

int64_t TensorMeta::numel() const {
  int64_t n = 1;
  for (int64_t s : sizes) n *= s;
  return n;
}

int64_t TensorMeta::nbytes() const { return numel() * static_cast<int64_t>(c10::elementSize(dtype)); }

bool TensorMeta::is_contiguous() const {
  // Size-1 dimensions may carry any stride, as in c10's own contiguity check.
  int64_t expected = 1;
  for (std::size_t i = sizes.size(); i-- > 0;) {
    if (sizes[i] == 1) continue;
    if (strides[i] != expected) return false;
    expected *= sizes[i];
  }
  return true;
}

namespace {
struct DtypeName {
  c10::ScalarType dtype;
  std::string_view short_name;
  std::string_view torch_name;
};
constexpr std::array kDtypeNames{
    DtypeName{c10::ScalarType::Float, "f32", "torch.float32"},
    DtypeName{c10::ScalarType::Double, "f64", "torch.float64"},
    DtypeName{c10::ScalarType::Half, "f16", "torch.float16"},
    DtypeName{c10::ScalarType::BFloat16, "bf16", "torch.bfloat16"},
    DtypeName{c10::ScalarType::Long, "i64", "torch.int64"},
    DtypeName{c10::ScalarType::Int, "i32", "torch.int32"},
    DtypeName{c10::ScalarType::Short, "i16", "torch.int16"},
    DtypeName{c10::ScalarType::Char, "i8", "torch.int8"},
    DtypeName{c10::ScalarType::Byte, "u8", "torch.uint8"},
    DtypeName{c10::ScalarType::Bool, "b8", "torch.bool"},
    DtypeName{c10::ScalarType::ComplexHalf, "c32", "torch.complex32"},
    DtypeName{c10::ScalarType::ComplexFloat, "c64", "torch.complex64"},
    DtypeName{c10::ScalarType::ComplexDouble, "c128", "torch.complex128"},
};

std::optional<c10::ScalarType> dtype_from_c10_name(std::string_view name) {
  for (int i = 0; i < static_cast<int>(c10::ScalarType::NumOptions); ++i) {
    auto dtype = static_cast<c10::ScalarType>(i);
    if (name == c10::toString(dtype)) return dtype;
  }
  return std::nullopt;
}
}  // namespace

std::string dtype_short_name(c10::ScalarType dtype) {
  for (const auto& entry : kDtypeNames)
    if (entry.dtype == dtype) return std::string(entry.short_name);
  return c10::toString(dtype);
}

std::optional<c10::ScalarType> dtype_from_short_name(std::string_view name) {
  for (const auto& entry : kDtypeNames)
    if (entry.short_name == name) return entry.dtype;
  return dtype_from_c10_name(name);
}

std::string dtype_torch_name(c10::ScalarType dtype) {
  for (const auto& entry : kDtypeNames)
    if (entry.dtype == dtype) return std::string(entry.torch_name);
  return "torch." + std::string(c10::toString(dtype));
}

std::optional<c10::ScalarType> dtype_from_torch_name(std::string_view name) {
  for (const auto& entry : kDtypeNames)
    if (entry.torch_name == name) return entry.dtype;
  constexpr std::string_view prefix = "torch.";
  if (name.starts_with(prefix)) return dtype_from_c10_name(name.substr(prefix.size()));
  return std::nullopt;
}

namespace {
// Whether `strides` are the contiguous strides of `sizes` (contiguous_strides, without the vector).
bool has_contiguous_strides(const TensorMeta& meta) {
  if (meta.strides.size() != meta.sizes.size()) return false;
  int64_t running = 1;
  for (std::size_t i = meta.sizes.size(); i-- > 0;) {
    if (meta.strides[i] != running) return false;
    running *= std::max<int64_t>(meta.sizes[i], 1);
  }
  return true;
}
}  // namespace

void append_to(std::string& out, const TensorMeta& meta) {
  out += dtype_short_name(meta.dtype);
  out += '[';
  append_ints(out, meta.sizes, ", ");
  out += ']';
  if (!has_contiguous_strides(meta)) {
    out += " stride=[";
    append_ints(out, meta.strides, ", ");
    out += ']';
  }
  if (meta.storage_offset != 0) {
    out += " offset=";
    append_int(out, meta.storage_offset);
  }
  if (!meta.device.is_cpu()) {
    out += " device=";
    out += meta.device.str();
  }
  if (meta.requires_grad) out += " requires_grad";
}

std::string to_string(const TensorMeta& meta) {
  std::string text;
  append_to(text, meta);
  return text;
}

std::ostream& operator<<(std::ostream& os, const TensorMeta& meta) { return os << to_string(meta); }

}  // namespace aotpipe
