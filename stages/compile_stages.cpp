#include <aotpipe/stages/compile_stages.h>
#include <aotpipe/stages/compile/compile_stage.h>
#include <aotpipe/stages/dedupe/dedupe.h>
#include <aotpipe/stages/joint/joint.h>
#include <aotpipe/stages/metadata/metadata_stage.h>
#include <aotpipe/stages/partition/default_partition.h>
#include <aotpipe/stages/partition/min_cut_partition.h>
#include <aotpipe/stages/partition/partition_stage.h>
#include <aotpipe/stages/synthetic_base/synthetic_base.h>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <stdexcept>

namespace aotpipe {

Partitioner partitioner_named(std::string_view name) {
  if (name == "min_cut") return partitioners::min_cut_rematerialization_partition();
  if (name == "default") return partitioners::default_partition();
  throw std::invalid_argument(fmt::format("unknown partitioner '{}' (expected min_cut or default)", name));
}

namespace {

// A stage type built with its default constructor, taking no parameter.
template <Stage<CompileState> S>
StageRegistry<CompileState>::Factory without_parameters(std::string_view name) {
  return [name](std::string_view parameters) -> AnyStage<CompileState> {
    detail::check_no_parameters(name, parameters);
    return S{};
  };
}

}  // namespace

const std::vector<CompileStageEntry>& compile_stages() {
  static const std::vector<CompileStageEntry> stages = {
      {"metadata", "trace the function on fake tensors: view and mutation metadata of inputs and outputs", "",
       without_parameters<CollectMetadataStage>("metadata")},
      {"dedupe", "drop inputs passed twice (the runtime passes one of them)", "",
       without_parameters<DedupeStage>("dedupe")},
      {"synthetic_base", "merge aliased inputs of which one is mutated into one synthetic base", "",
       without_parameters<SyntheticBaseStage>("synthetic_base")},
      {"joint", "trace the functional joint forward+backward graph (inference: the forward graph)", "",
       without_parameters<JointStage>("joint")},
      {"partition", "split the joint graph into forward and backward", "min_cut or default",
       [](std::string_view parameters) -> AnyStage<CompileState> {
         if (parameters.empty()) return PartitionStage{};
         return PartitionStage{partitioner_named(parameters), std::string(parameters)};
       }},
      {"compile", "hand the graphs to the backend compilers", "", without_parameters<CompileGraphsStage>("compile")},
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
