#pragma once
// The compile cache's codec of a CompiledArtifact (runtime/compiled_artifact.h): the artifact as
// bytes and back.
#include <aotpipe/runtime/compiled_artifact.h>

#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>

namespace aotpipe {

// A malformed, truncated or inconsistent serialized artifact.
class ArtifactFormatError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The artifact as bytes (CBOR for the structure; graphs in the text form and tensor constants as
// raw bytes after it) and back. deserialize_artifact reads untrusted bytes: it never executes
// anything from them, checks every field and index, and throws ArtifactFormatError (never
// crashes) on anything malformed. It reads the structure at once and leaves the graphs and
// their constants to the first traced() / partition(), which check them then (verified graphs,
// arities against the metadata) and throw ArtifactFormatError naming `origin`.
std::string serialize_artifact(const CompiledArtifact& artifact);
// The version of that layout (part of the cache key).
int artifact_schema_version();
// `payload` lies inside what `owner` keeps alive (a string, a mapped file), which the artifact
// keeps for its graphs. `on_malformed_graph`
// runs (once per failing decode, before the ArtifactFormatError is thrown) when a graph turns out
// malformed: the compile cache removes the entry then, so that the next compile recompiles it.
CompiledArtifact deserialize_artifact(std::shared_ptr<const void> owner, std::string_view payload,
                                      const std::string& origin = "artifact",
                                      std::function<void()> on_malformed_graph = nullptr);
CompiledArtifact deserialize_artifact(std::string_view bytes);  // a copy of `bytes`

}  // namespace aotpipe
