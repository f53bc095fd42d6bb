#include <aotpipe/graph/layout_bounds.h>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

namespace aotpipe {
namespace {

bool multiply(int64_t a, int64_t b, int64_t& out) { return !__builtin_mul_overflow(a, b, &out); }
bool add(int64_t a, int64_t b, int64_t& out) { return !__builtin_add_overflow(a, b, &out); }

}  // namespace

std::optional<std::string> sizes_error(c10::IntArrayRef sizes) {
  int64_t elements = 1;  // of max(size, 1) per dimension: the largest contiguous stride's product
  for (std::size_t d = 0; d < sizes.size(); ++d) {
    if (sizes[d] < 0) return fmt::format("size {} of dimension {} is negative", sizes[d], d);
    if (!multiply(elements, std::max<int64_t>(sizes[d], 1), elements))
      return fmt::format("sizes [{}] hold more than 2^63 elements", fmt::join(sizes, ", "));
  }
  return std::nullopt;
}

std::optional<std::string> layout_error(const TensorMeta& meta) {
  if (auto error = sizes_error(meta.sizes)) return error;
  if (meta.strides.size() != meta.sizes.size())
    return fmt::format("{} strides for {} sizes", meta.strides.size(), meta.sizes.size());
  if (meta.storage_offset < 0) return fmt::format("storage offset {} is negative", meta.storage_offset);
  for (std::size_t d = 0; d < meta.strides.size(); ++d)
    if (meta.strides[d] < 0) return fmt::format("stride {} of dimension {} is negative", meta.strides[d], d);
  if (std::find(meta.sizes.begin(), meta.sizes.end(), 0) != meta.sizes.end()) return std::nullopt;  // no element
  int64_t extent = meta.storage_offset;  // the furthest element's index in the storage
  for (std::size_t d = 0; d < meta.sizes.size(); ++d) {
    int64_t span = 0;
    if (!multiply(meta.sizes[d] - 1, meta.strides[d], span) || !add(extent, span, extent))
      return fmt::format("sizes [{}] with strides [{}] reach beyond 2^63 elements", fmt::join(meta.sizes, ", "),
                         fmt::join(meta.strides, ", "));
  }
  int64_t bytes = 0;
  if (!add(extent, 1, extent) || !multiply(extent, static_cast<int64_t>(c10::elementSize(meta.dtype)), bytes))
    return fmt::format("a {} tensor of sizes [{}] spans more than 2^63 bytes", dtype_short_name(meta.dtype),
                       fmt::join(meta.sizes, ", "));
  return std::nullopt;
}

int64_t storage_extent(const TensorMeta& meta) {
  if (meta.numel() == 0) return 0;
  int64_t extent = meta.storage_offset + 1;
  for (std::size_t d = 0; d < meta.sizes.size(); ++d) extent += (meta.sizes[d] - 1) * meta.strides[d];
  return extent;
}

}  // namespace aotpipe
