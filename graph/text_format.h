#pragma once
// Spellings shared by the printer and the parser of the text form.
#include <c10/core/Layout.h>
#include <c10/core/MemoryFormat.h>

#include <optional>
#include <string>
#include <string_view>

namespace aotpipe {

// Words printed without quotes: [A-Za-z_][A-Za-z0-9_.]*
bool is_plain_word(std::string_view text);

std::string layout_torch_name(c10::Layout layout);
std::optional<c10::Layout> layout_from_torch_name(std::string_view name);
std::string memory_format_torch_name(c10::MemoryFormat format);
std::optional<c10::MemoryFormat> memory_format_from_torch_name(std::string_view name);

}  // namespace aotpipe
