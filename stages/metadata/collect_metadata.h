#pragma once
// Stage 1 of a compile: run the function once, functionalized, on fake tensors and describe
// its input mutations and output aliasing (PyTorch's run_functionalized_fw_and_collect_metadata).
#include <aotpipe/graph/calling_convention.h>
#include <aotpipe/tracer/tracer.h>
#include <aotpipe/stages/metadata/view_and_mutation_meta.h>

#include <ATen/core/Tensor.h>

#include <functional>
#include <string>
#include <vector>

namespace aotpipe {

struct CollectMetadataOptions {
  bool keep_input_mutations = false;
  // Training (AOTAutograd's is_train): some input requires grad and grad mode is on. Unset: decided
  // from the example arguments and the calling thread's grad mode.
  std::optional<bool> is_train;
  // TraceOptions::allow_cpu_fallback for the analysis trace.
  bool allow_cpu_fallback = true;
  // When set, the ops the analysis trace ran on the CPU fallback are added here.
  CpuFallbackCounts* cpu_fallbacks = nullptr;
};

// Runs the stage-1 analysis alone. The example arguments are never modified (they are converted
// to fake tensors keeping sizes, strides, offsets, dtype, device, requires_grad, leafness and
// storage sharing). Throws aotpipe::TraceError naming the op when the function cannot be traced.
ViewAndMutationMeta collect_metadata(const Function& fn, const TensorList& example_args,
                                     bool keep_input_mutations = false);
ViewAndMutationMeta collect_metadata(const Function& fn, const TensorList& example_args,
                                     const CollectMetadataOptions& options);

// JSON with PyTorch's field names (see ../shared/design/api.md): input_info[], output_info[],
// num_intermediate_bases, keep_input_mutations, traced_tangents[] {shape, dtype ("torch.float32")}.
std::string to_json(const ViewAndMutationMeta& meta);

}  // namespace aotpipe
