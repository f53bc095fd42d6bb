#include "aotpipe/load_graph.h"

#include "aotpipe/graph_files.h"

#include <aotpipe/graph/parser.h>
#include <aotpipe/graph/verifier.h>

#include <fmt/format.h>

#include <exception>

namespace aotpipe::cli {

std::string_view to_string(FailureStage stage) {
  switch (stage) {
    case FailureStage::Read: return "read error";
    case FailureStage::Parse: return "parse error";
    case FailureStage::Verify: return "verify error";
    case FailureStage::Run: return "run error";
  }
  return "error";
}

void print_message_lines(std::string_view message, std::string_view indent) {
  std::size_t pos = 0;
  while (pos <= message.size()) {
    std::size_t end = message.find('\n', pos);
    if (end == std::string_view::npos) end = message.size();
    if (end > pos) fmt::print("{}{}\n", indent, message.substr(pos, end - pos));
    pos = end + 1;
  }
}

std::string strip_backtrace(std::string message) {
  auto pos = message.find("Exception raised from ");
  if (pos != std::string::npos) {
    message.erase(pos);
    while (!message.empty() && (message.back() == '\n' || message.back() == ' ')) message.pop_back();
  }
  return message;
}

LoadedGraph load_graph(const std::filesystem::path& path) {
  LoadedGraph result;
  std::string text;
  try {
    text = read_text_file(path);
  } catch (const std::exception& e) {
    result.failure = Failure{FailureStage::Read, e.what(), {}};
    return result;
  }
  try {
    result.graph.emplace(parse_graph(text));
  } catch (const std::exception& e) {
    // ParseError::what() is already "line L, column C: message"; anything else the parser lets
    // escape (an unknown operator reported by the dispatcher...) is a parse failure too.
    result.failure = Failure{FailureStage::Parse, strip_backtrace(e.what()), {}};
    return result;
  }
  try {
    verify(*result.graph,
           VerifyOptions{.require_tensor_meta = true, .allow_dead_code = false, .require_bound_constants = false});
  } catch (const VerifyError& e) {
    result.graph.reset();
    const auto& issues = e.issues();
    std::string summary;
    if (!issues.empty()) {
      summary = fmt::format("[{}] {}", to_string(issues.front().kind), issues.front().message);
      if (issues.size() > 1) summary += fmt::format(" (and {} more)", issues.size() - 1);
    }
    result.failure = Failure{FailureStage::Verify, e.what(), std::move(summary)};
  } catch (const std::exception& e) {
    result.graph.reset();
    result.failure = Failure{FailureStage::Verify, strip_backtrace(e.what()), {}};
  }
  return result;
}

}  // namespace aotpipe::cli
