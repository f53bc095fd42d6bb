#pragma once
// post_compile: a CompiledArtifact made callable (PyTorch's post_compile wrappers). The runtime
// of the inner convention (runtime/aot_runtime.h) around the backend-compiled graphs, inside the
// analysis stages' wrappers rebuilt from their plans. A cold compile and a cache hit both end
// here; a hit runs nothing else but the backend compilers (compile_graphs, stages/compile).
#include <aotpipe/runtime/compiled_artifact.h>
#include <aotpipe/backend/compiled_graphs.h>

#include <memory>
#include <string>

namespace aotpipe {

// The callable of the user's convention. `wrappers`: the runtime wrappers, outermost first
// (a cold compile passes its CompileState's, which may hold user closures; a cache hit passes
// those rebuilt from artifact->wrappers).
RuntimeFn post_compile(std::shared_ptr<const CompiledArtifact> artifact, CompiledGraphs graphs,
                       const std::vector<RuntimeWrapper>& wrappers);
// The same with the wrappers rebuilt from the artifact's plans.
RuntimeFn post_compile(std::shared_ptr<const CompiledArtifact> artifact, CompiledGraphs graphs);

// A cache hit's compiled graphs: the config's backend compilers, run on the graphs when they are
// first needed (an inference graph at its first call; a training function's forward and backward
// both at the forward's first call, compile_training_graphs_on_first_call), so a hit decodes and
// compiles nothing up front.
// `notes`: the artifact's, what the backends said when it was compiled.
CompiledGraphs compile_on_first_call(const std::shared_ptr<const CompiledArtifact>& artifact, const AotConfig& config);

// The CompileState a cache hit reports for inspection (CompileOutput::state): the artifact's
// metadata, graphs and partition, with `config`; fn and args are empty.
std::shared_ptr<const CompileState> state_of(const CompiledArtifact& artifact, const AotConfig& config,
                                             const CompiledGraphs& graphs);

}  // namespace aotpipe
