#pragma once
// The runtime of one compiled signature: the autograd Function around the compiled forward and
// backward (AOTDispatchAutograd), and the epilogue that applies input mutations and regenerates
// aliased outputs (PyTorch's _create_runtime_wrapper). See docs/stages/runtime.md.
#include <aotpipe/stages/compile_state.h>

#include <memory>

namespace aotpipe {

// What the runtime needs from a finished compile; immutable and shared by every call.
struct CompiledArtifacts {
  std::string name;
  ViewAndMutationMeta meta;  // of the inner calling convention (after dedupe / synthetic base)
  bool trace_joint = false;
  CompiledGraph forward;     // training: primals -> forward returns + saved values; else inference
  CompiledGraph backward;    // saved values + tangents -> gradients of the grad-requiring primals
  std::size_t num_saved = 0;
  std::vector<bool> tangent_mask;               // per forward return
  // Per forward return: goes through autograd (not a metadata-only input mutation or an aliased
  // output, which Python wraps in TensorAlias).
  std::vector<bool> autograd_returns;
  std::vector<std::size_t> grad_primals;        // primal index of each backward output
  std::vector<std::size_t> undefined_grads;     // backward outputs autograd left undefined
  // The device of each input it was compiled for (inner convention; CPU for undefined ones):
  // a call with a tensor elsewhere is refused by name instead of failing inside a kernel.
  std::vector<c10::Device> input_devices;
};

// The callable of the inner convention: prologue, compiled graphs (through autograd when
// training), epilogue.
RuntimeFn make_runtime(std::shared_ptr<const CompiledArtifacts> artifacts);

// The artifacts of a CompileState whose stages all ran.
std::shared_ptr<const CompiledArtifacts> artifacts_of(const CompileState& state);

}  // namespace aotpipe
