#include <aotpipe/pipeline/identified.h>
#include <aotpipe/stages/partition/partition_stage.h>

namespace aotpipe {

std::shared_ptr<const PartitionResult> partition_joint(const JointGraph& joint, const Partitioner& partitioner) {
  auto result = std::make_shared<PartitionResult>(partitioner(joint));
  result->partitioner = identity_of(partitioner).value_or("");
  return result;
}

std::string PartitionStage::description() const {
  if (!parameter.empty()) return "partition(" + parameter + ")";
  if (!partitioner) return "partition";
  return "partition(" + identity_of(partitioner).value_or("unnamed") + ")";
}

Task<PreservedAnalyses> PartitionStage::run(CompileState& state, const JobEnv&) const {
  // The function is left as it is: its analyses stay.
  if (state.traced.joint)  // inference: nothing to split
    state.partition =
        partition_joint(*state.traced.joint, partitioner ? partitioner : resolve_defaults(state.config).partition_fn);
  co_return PreservedAnalyses::all();
}

}  // namespace aotpipe
