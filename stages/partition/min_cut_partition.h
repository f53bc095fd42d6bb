#pragma once
// PyTorch's min_cut_rematerialization_partition (torch/_functorch/partitioners.py): the backward
// recomputes cheap forward ops instead of saving their results; what to save is a minimum cut
// of a flow network weighted by bytes. See docs/stages/partition.md.
#include <aotpipe/stages/partition/partition_error.h>
#include <aotpipe/stages/partition/max_flow.h>
#include <aotpipe/stages/partition/partitioner.h>

#include <cstdint>
#include <optional>
#include <set>
#include <string>

namespace aotpipe::partitioners {

// Knobs of torch._functorch.config the partitioner reads (defaults as in torch 2.11) and the
// recomputable-op list. Op names are packets: "aten::mul" covers every overload of mul.
struct MinCutOptions {
  // Replaces PyTorch's default allowlist (get_default_op_list().recomputable_ops) when set:
  // what the `recomputable_ops=` argument of min_cut_rematerialization_partition did in
  // PyTorch 2.0 (test_min_cut_partitioner_recomputable_ops). Fusible ops follow the list.
  std::optional<std::set<std::string>> recomputable_ops;
  // Added to the allowlist (and to the fusible ops), e.g. {"aten::mm"}.
  std::set<std::string> extra_recomputable_ops;
  bool ban_recompute_used_far_apart = true;
  bool ban_recompute_long_fusible_chains = true;
  bool ban_recompute_materialized_backward = true;
  bool ban_recompute_not_in_allowlist = true;
  bool ban_recompute_reductions = true;  // an op whose output is 4x smaller than its inputs is saved
  bool recompute_views = false;          // true: views are never saved (infinite weight)
  bool cse = true;                       // merge repeated calls first (eliminate_common_subexpressions)
  // Order each graph for the fewest bytes alive at once (graph/memory_schedule.h), after the
  // autograd engine's order; what Inductor's reorder_for_peak_memory does for its kernels.
  bool reorder_for_peak_memory = true;
  std::int64_t max_dist_from_bw = 1000;
  MaxFlowAlgorithm algorithm = kDefaultMaxFlowAlgorithm;
};

// The partitioner. Saves the minimum-weight set of values that separates what the backward must
// compute (everything reading a tangent) from what it cannot recompute (primals and banned
// ops); the backward recomputes the rest, each recomputed node placed just before its first
// use. Falls back to default_partition when nothing depends on the tangents. Throws
// PartitionError (e.g. when a value can be neither saved nor recomputed).
Partitioner min_cut_rematerialization_partition(MinCutOptions options = {});
// Its identity for the compile cache: the version and every option.
std::string min_cut_identity(const MinCutOptions& options);
PartitionResult min_cut_rematerialization_partition(const JointGraph& joint, const MinCutOptions& options);

// For tests and the benchmark: the flow network the partitioner builds for `joint` (after
// CSE when options.cse) and the values its cut saves. Vertex 2+2i / 3+2i are node i's in / out
// halves in graph order (placeholders first; multi-output ops as a tuple node then one node per
// result read).
struct MinCutProblem {
  Graph graph{"joint"};  // the graph the network was built from (CSE'd copy of the joint)
  FlowNetwork network;
  std::vector<std::string> vertex_names;  // "mul_in", "mul_out", "source", "sink"
  std::vector<std::string> banned;        // values banned from recomputation, graph order
};
MinCutProblem build_min_cut_problem(const JointGraph& joint, const MinCutOptions& options = {});

}  // namespace aotpipe::partitioners
