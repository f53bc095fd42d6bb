#pragma once
// The compile stages by name, so a pipeline can be written as text (`aotpipe compile
// --pipeline`, as `opt -passes=`):
//
//   metadata,dedupe,synthetic_base,joint,partition(min_cut),compile
//
// `partition` takes an optional parameter, `min_cut` or `default`, overriding the config's
// partitioner. Users may add their own stages to a registry of their own made from
// add_compile_stages().
#include <aotpipe/pipeline/stage_registry.h>
#include <aotpipe/stages/compile_state.h>

#include <string_view>

namespace aotpipe {

// The text of default_compile_pipeline().
inline constexpr std::string_view kDefaultCompilePipeline = "metadata,dedupe,synthetic_base,joint,partition,compile";

// Registers metadata, dedupe, synthetic_base, joint, partition and compile.
void add_compile_stages(StageRegistry<CompileState>& registry);
// A registry holding exactly those (and the built-in `group`).
const StageRegistry<CompileState>& compile_stage_registry();

// A partitioner by its pipeline-text name: "min_cut" or "default". Throws std::invalid_argument
// naming the accepted ones.
Partitioner partitioner_named(std::string_view name);

}  // namespace aotpipe
