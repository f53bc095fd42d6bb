#pragma once
// Reading, parsing and verifying one graph file, with errors classified for reporting.
#include <aotpipe/graph/graph.h>

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

namespace aotpipe::cli {

// Where handling a graph file failed.
enum class FailureStage { Read, Parse, Verify, Run };
std::string_view to_string(FailureStage stage);  // "read error", "parse error", ...

struct Failure {
  FailureStage stage;
  std::string message;  // may span lines (a verifier reports every issue)
  std::string summary;  // one line for tables; empty: the message's first line
  std::string one_line() const { return summary.empty() ? message.substr(0, message.find('\n')) : summary; }
};

struct LoadedGraph {
  std::optional<Graph> graph;      // set on success
  std::optional<Failure> failure;  // set on failure
};

// An error message without the C++ backtrace c10::Error appends ("Exception raised from ...
// (most recent call first):" and the frames after it).
std::string strip_backtrace(std::string message);

// Prints each non-empty line of a (possibly multi-line) message on stdout, after `indent`: how
// the reports list a failure's message under its heading.
void print_message_lines(std::string_view message, std::string_view indent);

// Reads, parses and verifies `path`; never throws for a bad file. Parse errors carry
// "line L, column C: ...". Tensor constants need not be bound (the text form has no data).
LoadedGraph load_graph(const std::filesystem::path& path);

}  // namespace aotpipe::cli
