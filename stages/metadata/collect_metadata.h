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

// collect_metadata in parts, for a caller that runs the trace itself (the metadata stage, whose
// trace may go on into the joint, JointProgramAnalysis in stages/joint/joint.h): trace with trace_options(),
// call inspect() once the function has returned (TraceOptions::inspect or plan_backward), then
// finish() with the trace's result. One collector serves one trace.
class MetadataCollector {
 public:
  // Reads the calling thread's grad mode: construct it where the trace will run.
  MetadataCollector(const TensorList& example_args, const CollectMetadataOptions& options);
  TraceOptions trace_options() const;
  // Fills the metadata from the trace's live tensors (without the view replays) and restores
  // grad mode if the function changed it.
  void inspect(const TraceInspection& trace);
  // Whether inspect() could finalize the metadata (finish() reports why not).
  bool finalized() const { return finalized_; }
  // The metadata as inspect() left it (finalized when finalized()); valid between inspect() and
  // finish(). Before inspect(): its is_train, decided from the arguments and grad mode.
  const ViewAndMutationMeta& meta() const { return meta_; }
  // Finalizes the metadata (throwing what finalize() throws), adds the view replays of aliased
  // outputs (read from the trace's graph, whose outputs from `first_output` on are the
  // function's) and the CPU-fallback counts to options.cpu_fallbacks: the whole trace's, or when
  // `trace_went_on` past the analysis (into a backward), those inspect() saw.
  ViewAndMutationMeta finish(const TraceResult& traced, std::size_t first_output = 0, bool trace_went_on = false);

 private:
  CollectMetadataOptions options_;
  bool prior_grad_enabled_;
  ViewAndMutationMeta meta_;
  CpuFallbackCounts forward_fallbacks_;
  bool finalized_ = false;
};

// JSON with PyTorch's field names (see ../shared/design/api.md): input_info[], output_info[],
// num_intermediate_bases, keep_input_mutations, traced_tangents[] {shape, dtype ("torch.float32")}.
std::string to_json(const ViewAndMutationMeta& meta);

}  // namespace aotpipe
