// Compile cache entries' payloads (what another machine or a Redis server hands back) as
// arbitrary bytes: deserialize_artifact rejects bad bytes with ArtifactFormatError only, and so
// does the decoding of the graphs it leaves for first use (traced(), partition()).
#include "fuzz_input.h"

#include <aotpipe/runtime/artifact_serialization.h>

using namespace aotpipe;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  constexpr std::string_view target = "artifact";
  fuzz::rejects_only_with<ArtifactFormatError>(target, "ArtifactFormatError", [&] {
    const CompiledArtifact artifact = deserialize_artifact(fuzz::as_text(data, size));
    (void)artifact.traced();
    (void)artifact.partition();
  });
  return 0;
}
