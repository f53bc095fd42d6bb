#pragma once
// CompiledArtifact: the result of one compile as plain data (PyTorch's AOTAutogradCacheEntry).
// What the stages decided, with nothing executable in it: the analysis stages' runtime plans,
// the metadata, the graphs and the partition. post_compile (runtime/post_compile.h) turns it
// into a callable; the compile cache (cache/compile_cache.h) stores it as bytes
// (runtime/artifact_serialization.h).
//
//   arguments -> analysis -> joint -> partition -> compile -> CompiledArtifact -> post_compile
#include <aotpipe/graph/graph.h>
#include <aotpipe/pipeline/lazy.h>
#include <aotpipe/stages/common/runtime_plans.h>
#include <aotpipe/stages/compile_state.h>
#include <aotpipe/stages/joint/traced_program.h>
#include <aotpipe/stages/partition/partitioner.h>
#include <aotpipe/tracer/tracer.h>

#include <c10/core/Device.h>

#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace aotpipe {

// The graphs of an artifact: training: the joint graph and its partition; inference: the
// inference graph.
struct ArtifactGraphs {
  TracedProgram traced;
  std::shared_ptr<const PartitionResult> partition;  // training
};

struct CompiledArtifact {
  std::string name;
  std::vector<RuntimePlan> wrappers;  // the analysis stages' post-compile halves, outermost first
  ViewAndMutationMeta meta;           // of the inner calling convention (after dedupe / synthetic base)
  // The device of each input it was compiled for (inner convention; CPU for undefined ones).
  std::vector<c10::Device> input_devices;
  CpuFallbackCounts cpu_fallbacks;
  std::vector<std::string> backend_notes;  // what the backend compilers said (CompiledGraphs::notes)

  // What post_compile needs besides the graphs, so that a cache hit builds its callable without
  // decoding one (they equal traced()'s and partition()'s).
  bool training = false;
  std::vector<std::size_t> grad_inputs;      // training: the primal each gradient is for
  std::vector<std::size_t> undefined_grads;  // training: gradients autograd left undefined
  std::size_t num_saved = 0;                 // training: values the forward saves for the backward

  // The graphs. A compile's artifact has them from the start; a cache hit's decodes (and
  // verifies) them on first use, each group once, and throws ArtifactFormatError then if one is
  // malformed. Both may be called from any thread.
  const TracedProgram& traced() const { return traced_.get(); }
  const std::shared_ptr<const PartitionResult>& partition() const { return partition_.get(); }
  // Whether traced() / partition() are decoded yet (a cache hit decodes each when first needed).
  bool traced_decoded() const { return traced_.is_made(); }
  bool partition_decoded() const { return partition_.is_made(); }
  bool graphs_decoded() const { return traced_decoded() && partition_decoded(); }

  // The graphs as they are (a compile), or as functions that decode them (deserialize_artifact;
  // `partition` null: an inference artifact, which has none).
  void set_graphs(ArtifactGraphs graphs);
  void set_graph_decoders(std::function<TracedProgram()> traced,
                          std::function<std::shared_ptr<const PartitionResult>()> partition);

 private:
  Lazy<TracedProgram> traced_;
  Lazy<std::shared_ptr<const PartitionResult>> partition_;
};

// Why a finished compile cannot be an artifact (a runtime wrapper that is a closure, not a
// plan); nullopt when it can.
std::optional<std::string> why_not_artifact(const CompileState& state);

// The artifact of a CompileState whose stages all ran. Wrappers without a plan are left out:
// such an artifact describes the graphs but cannot rebuild the runtime (why_not_artifact).
std::shared_ptr<const CompiledArtifact> artifact_of(const CompileState& state);

}  // namespace aotpipe
