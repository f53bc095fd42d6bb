#pragma once
// Partitioners split a joint forward+backward graph into a forward graph and a backward graph
// (PyTorch's torch/_functorch/partitioners.py). See docs/stages/partition.md.
#include <aotpipe/graph/graph.h>
#include <aotpipe/graph/memory_schedule.h>
#include <aotpipe/pipeline/identified.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace aotpipe {

// The joint graph as the joint stage produces it.
//   inputs:  num_primals primals (primals_1...), then tangents (tangents_1...)
//   outputs: num_fwd_outputs forward outputs, then the backward outputs (gradients)
// Nodes carry attrs()["phase"] = "forward" | "backward" (what the tracer saw); partitioners
// decide from the data flow (what depends on tangents), not from the tag alone.
struct JointGraph {
  Graph graph{"joint"};
  std::size_t num_primals = 0;
  std::size_t num_fwd_outputs = 0;
};

struct PartitionResult {
  // inputs: the primals; outputs: the forward outputs, then the saved values.
  Graph forward{"forward"};
  // inputs: the saved values (same order), then the tangents; outputs: the backward outputs.
  Graph backward{"backward"};
  std::size_t num_fwd_outputs = 0;
  std::vector<std::string> saved_values;  // names of joint-graph values the forward saves
  int64_t saved_bytes = 0;                // sum of TensorMeta::nbytes() over saved tensors
  std::vector<std::string> recomputed;    // labels of forward nodes the backward recomputes
  // Per backward input: whether the backward frees it as it goes (a saved tensor the runtime
  // hands over, a tangent) or its holder keeps it (a primal's memory, a forward output's).
  std::vector<InputLifetime> backward_input_lifetimes;
  // How each graph was ordered for peak memory (graph/memory_schedule.h), with the estimates.
  MemorySchedule forward_schedule;
  MemorySchedule backward_schedule;
  // The identity of the partitioner that made it (pipeline/identified.h), as the partition
  // stage records it; empty for a partitioner without one. Reports read it instead of guessing.
  std::string partitioner;
};

using Partitioner = std::function<PartitionResult(const JointGraph&)>;

// A partitioner the compile cache may key on (pipeline/identified.h): `identity` names it, its
// version and its options. The built-in partitioners are such; a plain lambda bypasses the cache.
Partitioner named_partitioner(std::string identity, Partitioner partitioner);

}  // namespace aotpipe
