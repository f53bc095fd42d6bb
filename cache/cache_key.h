#pragma once
// The compile cache's key: everything a compile's result depends on, each ingredient kept
// readable so that `aotpipe cache explain` can show why two compiles miss each other.
//   program   the canonical graph: value names normalized, the graph's name dropped, tensor
//             constants by content (so graphs that differ only in names share an entry)
//   inputs    sizes, strides, offsets, dtypes, devices, requires_grad, leafness, the duplicate
//             and alias pattern (input_signature), grad mode and the ambient autocast state
//   config    pipeline text, partitioner and compiler identities (pipeline/identified.h), options
//   versions  aotpipe's build, libtorch's version, the artifact schema
#include <aotpipe/runtime/build_id.h>  // aotpipe_build_id, part of the key
#include <aotpipe/graph/graph.h>
#include <aotpipe/stages/compile_state.h>

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace aotpipe {

struct CacheKey {
  std::vector<std::pair<std::string, std::string>> ingredients;  // (name, value), in key order
  std::string digest;                                            // hex XXH3-128 over the ingredients: the entry's name

  // One "name: value" line per ingredient.
  std::string explain() const;
};

// A key, or why a compile cannot be cached (a compiler or partitioner without an identity, a
// stage that is not built in, a function that does not trace).
struct CacheKeyOrBypass {
  std::optional<CacheKey> key;
  std::string bypass_reason;
};

// The ingredients a key takes from the configuration and the build, in key order (pipeline,
// partitioner and compiler identities, options, aotpipe's build, libtorch's version, the artifact
// schema), or why the configuration cannot be cached (a compiler or partitioner without an
// identity, a stage that is not built in). For callers that key a compile by something cheaper
// than its program (aotpipe compile's file records: a graph file's bytes).
struct ConfigIngredients {
  std::vector<std::pair<std::string, std::string>> ingredients;
  std::string bypass_reason;
  bool ok() const { return bypass_reason.empty(); }
};
ConfigIngredients config_key_ingredients(const AotConfig& config, std::string_view pipeline_text);

// The cache key of a call: sizes, strides, offsets, dtypes, devices, requires_grad, leafness,
// the duplicate and aliasing pattern of the arguments, grad mode and the ambient autocast state
// (CPU and CUDA: enabled, and to which dtype). Also what a
// CompiledFunction keys its compiles by within a process.
std::string input_signature(const TensorList& args);

// The grad_mode ingredient of this thread: "enabled" or "disabled".
std::string grad_mode_ingredient();

// `program`: the graph the function runs (a graph file, an exported program), or null: then
// `fn` is traced on fake copies of `args` and the trace is the program.
CacheKeyOrBypass make_cache_key(const Graph* program, const Function& fn, const TensorList& args,
                                const AotConfig& config, std::string_view pipeline_text);

// The digest of a list of ingredients (what CacheKey::digest holds).
std::string cache_key_digest(const std::vector<std::pair<std::string, std::string>>& ingredients);

// The graph's text form with values renamed v0, v1, ... in order of definition and the graph
// named "g": equal for graphs that differ only in names.
std::string canonical_graph_text(const Graph& graph);

// Hex XXH3-128 (32 digits): the key's digest and the entries' checksum.
std::string content_hash_hex(std::string_view bytes);

}  // namespace aotpipe
