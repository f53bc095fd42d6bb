#pragma once
// Reads the text form written by print_graph (docs/ir.md) back into a Graph.
#include <aotpipe/graph/graph.h>

#include <stdexcept>
#include <optional>
#include <string>
#include <string_view>

namespace aotpipe {

// A syntax or name error in the text form; what() reads "line L, column C: <message>".
class ParseError : public std::runtime_error {
 public:
  ParseError(std::size_t line, std::size_t column, const std::string& message);
  std::size_t line() const { return line_; }
  std::size_t column() const { return column_; }
  const std::string& message() const { return message_; }

 private:
  std::size_t line_;
  std::size_t column_;
  std::string message_;
};

// Parses one graph. Tensor constants are declared but carry no data: bind them with
// Graph::bind_constant before running. Throws ParseError (never crashes) on malformed text.
Graph parse_graph(std::string_view text);

// The name a graph's text declares (`graph NAME(` or `graph "quoted name"(`), read by the same
// lexer from the text's first tokens, without parsing the rest: a prefix of a file will do.
// nullopt when the text does not start that way.
std::optional<std::string> peek_graph_name(std::string_view text);

}  // namespace aotpipe
