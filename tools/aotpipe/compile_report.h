#pragma once
// What `aotpipe compile` writes for each compiled graph, and the numbers its summary shows.
#include <aotpipe/stages/compile_state.h>

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

namespace aotpipe::cli {

inline constexpr std::size_t kMaxSvgNodes = 150;

struct PartitionNumbers {
  std::size_t saved = 0;  // values saved for the backward
  int64_t saved_bytes = 0;
  std::size_t recomputed = 0;  // forward nodes the backward recomputes
};

struct GraphSummary {
  bool training = false;  // a joint graph was traced and partitioned
  std::size_t ops = 0;    // calls in the joint graph (training) or the inference graph
  std::size_t forward_ops = 0, backward_ops = 0;
  // Both partitioners on the same joint graph, whatever the pipeline used (training only).
  std::optional<PartitionNumbers> default_partition, min_cut;
};

// Both partitioners' numbers on the joint graph. The one that made state.partition (its
// PartitionResult::partitioner) is not run again: its numbers are that partition's.
GraphSummary summarize(const CompileState& state);

// Into `dir` (created): forward.aotg and backward.aotg (training) or inference.aotg,
// joint.aotg, metadata.json, partition.txt (saved values with their bytes, recomputed ops, both
// partitioners' totals), joint.dot, and joint.svg when `render_svg`, Graphviz `dot` runs and the
// joint graph has at most kMaxSvgNodes nodes.
// Throws std::runtime_error naming the file on an I/O failure.
void write_graph_outputs(const CompileState& state, const GraphSummary& summary, const std::filesystem::path& dir,
                         bool render_svg);

// The partition report (partition.txt).
std::string partition_report(const CompileState& state, const GraphSummary& summary);

}  // namespace aotpipe::cli
