#pragma once
// The joint forward+backward graph as Graphviz DOT with the partition drawn: nodes the forward
// computes, nodes only the backward computes, nodes the backward recomputes, and the saved
// values (the cut) with their edges into the backward in bold red.
#include <aotpipe/stages/partition/partitioner.h>

#include <string>

namespace aotpipe::cli {

std::string joint_graph_dot(const JointGraph& joint, const PartitionResult& partition);

}  // namespace aotpipe::cli
