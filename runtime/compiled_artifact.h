#pragma once
// CompiledArtifact: the result of one compile as plain data (PyTorch's AOTAutogradCacheEntry).
// What the stages decided, with nothing executable in it: the analysis stages' runtime plans,
// the metadata, the graphs and the partition. post_compile (runtime/post_compile.h) turns it
// into a callable; the compile cache (runtime/compile_cache.h) stores it as bytes.
//
//   arguments -> analysis -> joint -> partition -> compile -> CompiledArtifact -> post_compile
#include <aotpipe/graph/graph.h>
#include <aotpipe/stages/common/runtime_plans.h>
#include <aotpipe/stages/compile_state.h>
#include <aotpipe/stages/joint/traced_program.h>
#include <aotpipe/stages/partition/partitioner.h>
#include <aotpipe/tracer/tracer.h>

#include <c10/core/Device.h>

#include <cstddef>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace aotpipe {

struct CompiledArtifact {
  std::string name;
  std::vector<RuntimePlan> wrappers;                 // the analysis stages' post-compile halves, outermost first
  ViewAndMutationMeta meta;                          // of the inner calling convention (after dedupe / synthetic base)
  TracedProgram traced;                              // training: the joint graph; inference: the inference graph
  std::shared_ptr<const PartitionResult> partition;  // training
  // The device of each input it was compiled for (inner convention; CPU for undefined ones).
  std::vector<c10::Device> input_devices;
  CpuFallbackCounts cpu_fallbacks;

  bool training() const noexcept { return traced.training(); }
};

// Why a finished compile cannot be an artifact (a runtime wrapper that is a closure, not a
// plan); nullopt when it can.
std::optional<std::string> why_not_artifact(const CompileState& state);

// The artifact of a CompileState whose stages all ran. Wrappers without a plan are left out:
// such an artifact describes the graphs but cannot rebuild the runtime (why_not_artifact).
std::shared_ptr<const CompiledArtifact> artifact_of(const CompileState& state);

// A malformed, truncated or inconsistent serialized artifact.
class ArtifactFormatError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The artifact as bytes (CBOR: graphs in the text form, tensor constants as raw bytes) and
// back. deserialize_artifact reads untrusted bytes: it never executes anything from them,
// checks every index against the graphs and the metadata, and throws ArtifactFormatError
// (never crashes) on anything malformed.
std::string serialize_artifact(const CompiledArtifact& artifact);
// The version of that layout (part of the cache key).
int artifact_schema_version();
CompiledArtifact deserialize_artifact(std::string_view bytes);

}  // namespace aotpipe
