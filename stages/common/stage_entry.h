#pragma once
// CompileStageEntry: what the stage list (compile_stages.h) knows of one compile stage. Each
// stage declares its own entry beside it (a static entry() of the stage type, in its folder);
// compile_stages() only lists them in pipeline order.
#include <aotpipe/pipeline/stage.h>
#include <aotpipe/pipeline/stage_registry.h>
#include <aotpipe/stages/compile_state.h>

#include <string_view>

namespace aotpipe {

// One compile stage: its name in pipeline text, what it does, and how to make it.
struct CompileStageEntry {
  std::string_view name;
  std::string_view summary;    // one line: the CLI's help, the docs' stage table
  std::string_view parameter;  // what its optional parameter may be; empty: it takes none
  StageRegistry<CompileState>::Factory make;
};

// The entry of a stage type built with its default constructor, taking no parameter.
template <Stage<CompileState> S>
CompileStageEntry entry_without_parameters(std::string_view name, std::string_view summary) {
  return {name, summary, "", StageRegistry<CompileState>::factory_without_parameters<S>(std::string(name))};
}

}  // namespace aotpipe
