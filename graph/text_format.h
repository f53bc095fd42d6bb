#pragma once
// Spellings shared by the printer and the parser of the text form.
#include <c10/core/Layout.h>
#include <c10/core/MemoryFormat.h>
#include <c10/util/ArrayRef.h>

#include <cstdint>

#include <optional>
#include <string>
#include <string_view>

namespace aotpipe {

// The lexer's character classes, ASCII only and inline (the lexer asks per character; the
// <cctype> functions are calls through the C locale, with the same answers for ASCII).
constexpr bool is_digit(char c) { return static_cast<unsigned char>(c - '0') < 10; }
constexpr bool is_alpha(char c) { return static_cast<unsigned char>((c | 0x20) - 'a') < 26; }
constexpr bool is_space(char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r' || c == '\v' || c == '\f'; }
constexpr bool is_ident_start(char c) { return is_alpha(c) || c == '_'; }
constexpr bool is_ident_char(char c) { return is_alpha(c) || is_digit(c) || c == '_' || c == '.'; }

// Words printed without quotes: what the lexer reads back as that one identifier,
// [A-Za-z_][A-Za-z0-9_.]*, except `inf` and `nan`, which it reads as numbers.
bool is_plain_word(std::string_view text);

// Decimal integers appended to `out` without formatting machinery (std::to_chars): the printer,
// TensorMeta's text and input signatures write many of them on hot paths.
void append_int(std::string& out, std::int64_t value);
void append_ints(std::string& out, c10::IntArrayRef values, std::string_view separator);

std::string layout_torch_name(c10::Layout layout);
std::optional<c10::Layout> layout_from_torch_name(std::string_view name);
std::string memory_format_torch_name(c10::MemoryFormat format);
std::optional<c10::MemoryFormat> memory_format_from_torch_name(std::string_view name);

}  // namespace aotpipe
