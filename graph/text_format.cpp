#include <aotpipe/graph/text_format.h>

#include <charconv>

#include <array>
#include <utility>

namespace aotpipe {

void append_int(std::string& out, std::int64_t value) {
  char digits[24];
  out.append(digits, std::to_chars(digits, digits + sizeof digits, value).ptr);
}

void append_ints(std::string& out, c10::IntArrayRef values, std::string_view separator) {
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (i) out += separator;
    append_int(out, values[i]);
  }
}

bool is_plain_word(std::string_view text) {
  if (text.empty() || !is_ident_start(text[0]) || text == "inf" || text == "nan") return false;
  for (char c : text)
    if (!is_ident_char(c)) return false;
  return true;
}

namespace {
constexpr std::array<std::pair<c10::Layout, std::string_view>, 7> kLayouts{{
    {c10::Layout::Strided, "torch.strided"},
    {c10::Layout::Sparse, "torch.sparse_coo"},
    {c10::Layout::SparseCsr, "torch.sparse_csr"},
    {c10::Layout::SparseCsc, "torch.sparse_csc"},
    {c10::Layout::SparseBsr, "torch.sparse_bsr"},
    {c10::Layout::SparseBsc, "torch.sparse_bsc"},
    {c10::Layout::Jagged, "torch.jagged"},
}};
constexpr std::array<std::pair<c10::MemoryFormat, std::string_view>, 4> kMemoryFormats{{
    {c10::MemoryFormat::Contiguous, "torch.contiguous_format"},
    {c10::MemoryFormat::Preserve, "torch.preserve_format"},
    {c10::MemoryFormat::ChannelsLast, "torch.channels_last"},
    {c10::MemoryFormat::ChannelsLast3d, "torch.channels_last_3d"},
}};

template <class Enum, std::size_t N>
std::string name_of(const std::array<std::pair<Enum, std::string_view>, N>& table, Enum value) {
  for (const auto& [e, name] : table)
    if (e == value) return std::string(name);
  return std::to_string(static_cast<int>(value));
}

template <class Enum, std::size_t N>
std::optional<Enum> value_of(const std::array<std::pair<Enum, std::string_view>, N>& table, std::string_view name) {
  for (const auto& [e, n] : table)
    if (n == name) return e;
  return std::nullopt;
}
}  // namespace

std::string layout_torch_name(c10::Layout layout) { return name_of(kLayouts, layout); }
std::optional<c10::Layout> layout_from_torch_name(std::string_view name) { return value_of(kLayouts, name); }
std::string memory_format_torch_name(c10::MemoryFormat format) { return name_of(kMemoryFormats, format); }
std::optional<c10::MemoryFormat> memory_format_from_torch_name(std::string_view name) {
  return value_of(kMemoryFormats, name);
}

}  // namespace aotpipe
