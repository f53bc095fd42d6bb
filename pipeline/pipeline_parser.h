#pragma once
// The textual pipeline description, as in `opt -passes=`:
//
//   pipeline   := [ element { "," element } ]
//   element    := name [ "(" parameters ")" ]
//   name       := letter or "_", then letters, digits, "_", "-", "."
//   parameters := any text with balanced parentheses, passed verbatim to the stage factory
//
// e.g. "metadata,dedupe,synthetic_base,joint,partition(min_cut),compile" or "a,group(b,c)"
// (a factory may parse its parameters as a nested pipeline, as "group" does). Blanks around
// names, commas and parentheses are ignored.
#include <cstddef>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace aotpipe {

class PipelineParseError : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

struct StageSpec {
  std::string name;
  std::string parameters;  // without the parentheses; empty when absent
  std::size_t offset = 0;  // of the name in the text, for error messages
};

// Splits a description into its top-level elements. Throws PipelineParseError naming the
// offending position.
std::vector<StageSpec> parse_pipeline_text(std::string_view text);

}  // namespace aotpipe
