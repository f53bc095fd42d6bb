#pragma once
// The compile stages: their one list, and the pipelines made from it. A pipeline can be written
// as text (`aotpipe compile --pipeline`, as `opt -passes=`):
//
//   metadata,dedupe,synthetic_base,joint,partition(min_cut),compile
//
// `partition` takes an optional parameter, `min_cut` or `default`, overriding the config's
// partitioner. Users may add their own stages to a registry of their own made from
// add_compile_stages().
#include <aotpipe/pipeline/pipeline.h>
#include <aotpipe/pipeline/stage_registry.h>
#include <aotpipe/stages/common/stage_entry.h>
#include <aotpipe/stages/compile_state.h>
#include <aotpipe/stages/partition/partition_stage.h>  // partitioner_named

#include <string>
#include <string_view>
#include <vector>

namespace aotpipe {

// The compile stages in the order of the default pipeline, each stage's entry (stage_entry.h)
// as the stage declares it beside itself. The one list of them: the default
// pipeline, the registry, `aotpipe compile --help` and `--list-stages`, and the stage table of
// docs/cli.md (checked by the cli_stages_in_docs test) all derive from it.
const std::vector<CompileStageEntry>& compile_stages();

// The default pipeline as text: every stage of compile_stages(), in order.
const std::string& default_compile_pipeline_text();

// Registers every stage of compile_stages().
void add_compile_stages(StageRegistry<CompileState>& registry);
// The stages of one compile: every stage of compile_stages(), in order.
Pipeline<CompileState> default_compile_pipeline();

// A registry holding exactly those (and the built-in `group`).
const StageRegistry<CompileState>& compile_stage_registry();

}  // namespace aotpipe
