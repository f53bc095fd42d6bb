#pragma once
// The runtime of one compiled signature: the autograd Function around the compiled forward and
// backward (AOTDispatchAutograd), and the epilogue that applies input mutations and regenerates
// aliased outputs (PyTorch's _create_runtime_wrapper). See docs/stages/runtime.md.
#include <aotpipe/runtime/post_compile.h>

#include <memory>

namespace aotpipe {

// The callable of the inner convention for an artifact and its compiled graphs: prologue,
// compiled graphs (through autograd when training), epilogue. post_compile wraps it.
RuntimeFn make_runtime(std::shared_ptr<const CompiledArtifact> artifact, CompiledGraphs graphs);

}  // namespace aotpipe
