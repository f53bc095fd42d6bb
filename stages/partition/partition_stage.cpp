#include <aotpipe/stages/partition/partition_stage.h>

#include <aotpipe/pipeline/identified.h>
#include <aotpipe/stages/partition/default_partition.h>
#include <aotpipe/stages/partition/min_cut_partition.h>

#include <fmt/format.h>

#include <stdexcept>

namespace aotpipe {

Partitioner partitioner_named(std::string_view name) {
  if (name == "min_cut") return partitioners::min_cut_rematerialization_partition();
  if (name == "default") return partitioners::default_partition();
  throw std::invalid_argument(fmt::format("unknown partitioner '{}' (expected min_cut or default)", name));
}

CompileStageEntry PartitionStage::entry() {
  return {"partition", "split the joint graph into forward and backward", "min_cut or default",
          [](std::string_view parameters) -> AnyStage<CompileState> {
            if (parameters.empty()) return PartitionStage{};
            return PartitionStage{partitioner_named(parameters), std::string(parameters)};
          }};
}

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
