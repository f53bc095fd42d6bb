#pragma once
// TracedProgram: what the joint stage hands the partition and compile stages, and what a
// CompiledArtifact keeps. Graphs are immutable once traced and shared by pointer, so the
// compile state, the artifact and a cache hit's report hold the same graphs without copies.
#include <aotpipe/graph/graph.h>
#include <aotpipe/stages/partition/partitioner.h>

#include <cstddef>
#include <memory>
#include <vector>

namespace aotpipe {

struct TracedProgram {
  // Training: the joint forward+backward graph.
  std::shared_ptr<const JointGraph> joint;
  std::vector<std::size_t> undefined_grads;  // joint gradients autograd left undefined (graph: zeros)
  std::vector<std::size_t> grad_inputs;      // the primal each joint gradient is for, in order
  // Inference: the forward graph.
  std::shared_ptr<const Graph> inference_graph;

  bool training() const noexcept { return joint != nullptr; }
};

}  // namespace aotpipe
