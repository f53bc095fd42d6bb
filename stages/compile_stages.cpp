#include <aotpipe/stages/compile_stages.h>
#include <aotpipe/stages/compile/compile_stage.h>
#include <aotpipe/stages/dedupe/dedupe.h>
#include <aotpipe/stages/joint/joint.h>
#include <aotpipe/stages/metadata/metadata_stage.h>
#include <aotpipe/stages/partition/partition_stage.h>
#include <aotpipe/stages/synthetic_base/synthetic_base.h>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace aotpipe {

const std::vector<CompileStageEntry>& compile_stages() {
  static const std::vector<CompileStageEntry> stages = {
      CollectMetadataStage::entry(), DedupeStage::entry(),    SyntheticBaseStage::entry(),
      JointStage::entry(),           PartitionStage::entry(), CompileGraphsStage::entry(),
  };
  return stages;
}

const std::string& default_compile_pipeline_text() {
  static const std::string text = [] {
    std::vector<std::string_view> names;
    for (const CompileStageEntry& stage : compile_stages()) names.push_back(stage.name);
    return fmt::format("{}", fmt::join(names, ","));
  }();
  return text;
}

Pipeline<CompileState> default_compile_pipeline() {
  Pipeline<CompileState> pipeline("aot");
  for (const CompileStageEntry& stage : compile_stages()) pipeline.add(stage.make({}));
  return pipeline;
}

void add_compile_stages(StageRegistry<CompileState>& registry) {
  for (const CompileStageEntry& stage : compile_stages()) registry.add(std::string(stage.name), stage.make);
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
