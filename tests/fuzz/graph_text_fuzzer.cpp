// The .aotg reader on arbitrary text: parse_graph rejects bad text with ParseError only; what
// it accepts prints and parses back to the same text (the printer and the parser agree); the
// verifier rejects with VerifyError only; and a graph that verifies goes through shape
// propagation on meta tensors, which rejects with GraphError only.
#include "fuzz_input.h"

#include <aotpipe/graph/meta_propagation.h>
#include <aotpipe/graph/parser.h>
#include <aotpipe/graph/printer.h>
#include <aotpipe/graph/verifier.h>

#include <fmt/format.h>

#include <optional>

using namespace aotpipe;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  constexpr std::string_view target = "graph_text";
  std::optional<Graph> graph;
  if (!fuzz::rejects_only_with<ParseError>(target, "ParseError",
                                           [&] { graph.emplace(parse_graph(fuzz::as_text(data, size))); }))
    return 0;
  const std::string printed = print_graph(*graph);
  std::optional<Graph> reparsed;
  try {
    reparsed.emplace(parse_graph(printed));
  } catch (const std::exception& e) {
    fuzz::property_failed(target, fmt::format("the printed graph does not parse: {}\n{}", e.what(), printed));
  }
  if (const std::string again = print_graph(*reparsed); again != printed)
    fuzz::property_failed(target, fmt::format("print(parse(print(g))) != print(g):\n{}\n---\n{}", printed, again));
  if (!fuzz::rejects_only_with<VerifyError>(target, "VerifyError", [&] { verify(*graph); })) return 0;
  fuzz::rejects_only_with<GraphError>(target, "GraphError", [&] { propagate_meta(*graph); });
  return 0;
}
