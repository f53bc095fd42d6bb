#include <aotpipe/pipeline/pipeline_parser.h>

#include <fmt/format.h>

#include <cctype>

namespace aotpipe {
namespace {

class PipelineTextParser {
 public:
  explicit PipelineTextParser(std::string_view text) : text_(text) {}

  std::vector<StageSpec> parse() {
    std::vector<StageSpec> specs;
    skip_blanks();
    if (at_end()) return specs;
    while (true) {
      specs.push_back(parse_element());
      skip_blanks();
      if (at_end()) return specs;
      if (text_[pos_] != ',') fail(fmt::format("expected ',' or end of text, found '{}'", text_[pos_]));
      ++pos_;
      skip_blanks();
    }
  }

 private:
  static bool starts_name(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; }
  static bool continues_name(char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.';
  }

  StageSpec parse_element() {
    StageSpec spec{.name = {}, .parameters = {}, .offset = pos_};
    if (at_end() || !starts_name(text_[pos_])) {
      fail(at_end() ? std::string("expected a stage name at the end of the text")
                    : fmt::format("expected a stage name, found '{}'", text_[pos_]));
    }
    while (!at_end() && continues_name(text_[pos_])) ++pos_;
    spec.name = std::string(text_.substr(spec.offset, pos_ - spec.offset));
    skip_blanks();
    if (!at_end() && text_[pos_] == '(') spec.parameters = parse_parameters();
    return spec;
  }

  // At '(': returns the text up to the matching ')', trimmed.
  std::string parse_parameters() {
    const std::size_t open = pos_++;
    int depth = 1;
    for (; !at_end(); ++pos_) {
      if (text_[pos_] == '(') ++depth;
      if (text_[pos_] == ')' && --depth == 0) break;
    }
    if (at_end()) {
      pos_ = open;
      fail("'(' is never closed");
    }
    std::string_view inside = text_.substr(open + 1, pos_ - open - 1);
    ++pos_;
    while (!inside.empty() && std::isspace(static_cast<unsigned char>(inside.front()))) inside.remove_prefix(1);
    while (!inside.empty() && std::isspace(static_cast<unsigned char>(inside.back()))) inside.remove_suffix(1);
    return std::string(inside);
  }

  void skip_blanks() {
    while (!at_end() && std::isspace(static_cast<unsigned char>(text_[pos_]))) ++pos_;
  }
  bool at_end() const { return pos_ >= text_.size(); }

  [[noreturn]] void fail(const std::string& what) const {
    throw PipelineParseError(fmt::format("invalid pipeline '{}': {} at offset {}", text_, what, pos_));
  }

  std::string_view text_;
  std::size_t pos_ = 0;
};

}  // namespace

std::vector<StageSpec> parse_pipeline_text(std::string_view text) { return PipelineTextParser(text).parse(); }

}  // namespace aotpipe
