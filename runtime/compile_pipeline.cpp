#include <aotpipe/runtime/compile_pipeline.h>
#include <aotpipe/stages/compile/compile_stage.h>
#include <aotpipe/stages/dedupe/dedupe.h>
#include <aotpipe/stages/joint/joint.h>
#include <aotpipe/stages/metadata/metadata_stage.h>
#include <aotpipe/stages/partition/default_partition.h>
#include <aotpipe/stages/partition/min_cut_partition.h>
#include <aotpipe/stages/synthetic_base/synthetic_base.h>

#include <fmt/format.h>

#include <stdexcept>

namespace aotpipe {

Partitioner partitioner_named(std::string_view name) {
  if (name == "min_cut") return partitioners::min_cut_rematerialization_partition();
  if (name == "default") return partitioners::default_partition();
  throw std::invalid_argument(fmt::format("unknown partitioner '{}' (expected min_cut or default)", name));
}

void add_compile_stages(StageRegistry<CompileState>& registry) {
  registry.add<CollectMetadataStage>("metadata")
      .add<DedupeStage>("dedupe")
      .add<SyntheticBaseStage>("synthetic_base")
      .add<JointStage>("joint")
      .add("partition",
           [](std::string_view parameters) -> AnyStage<CompileState> {
             return PartitionStage{parameters.empty() ? Partitioner{} : partitioner_named(parameters)};
           })
      .add<CompileGraphsStage>("compile");
}

const StageRegistry<CompileState>& compile_stage_registry() {
  static const StageRegistry<CompileState>* registry = [] {
    auto* r = new StageRegistry<CompileState>();  // never destroyed: used from pool threads
    add_compile_stages(*r);
    return r;
  }();
  return *registry;
}

}  // namespace aotpipe
