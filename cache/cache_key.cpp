#include <aotpipe/cache/cache_key.h>
#include <aotpipe/graph/error_text.h>

#include <aotpipe/runtime/artifact_serialization.h>
#include <aotpipe/graph/autocast_region.h>
#include <aotpipe/graph/example_tensor.h>
#include <aotpipe/graph/printer.h>
#include <aotpipe/graph/text_format.h>
#include <aotpipe/stages/compile_stages.h>

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <fmt/format.h>
#include <torch/headeronly/version.h>

#include <iterator>
#include <mutex>
#include <unordered_map>

#define XXH_INLINE_ALL
#include <xxhash.h>

namespace aotpipe {

namespace {

// XXH3-128 (xxHash): fast enough to hash a model's constants on every lookup (tens of GB/s).
class Hasher {
 public:
  Hasher() { XXH3_128bits_reset(&state_); }
  void add(const void* data, std::size_t size) { XXH3_128bits_update(&state_, data, size); }
  void add(std::string_view text) {
    const std::uint64_t size = text.size();  // length-prefixed: no two sequences collide by splitting
    add(&size, sizeof size);
    add(text.data(), text.size());
  }
  std::string hex() {
    const XXH128_hash_t h = XXH3_128bits_digest(&state_);
    return fmt::format("{:016x}{:016x}", h.high64, h.low64);
  }

 private:
  XXH3_state_t state_;
};

// The graph's tensor constants by content (the text form names them but carries no data).
std::string constants_digest(const Graph& graph) {
  if (graph.tensor_constants().empty()) return "none";
  Hasher sha;
  for (const auto& [key, tensor] : graph.tensor_constants()) {
    sha.add(key);
    if (!tensor.defined()) {
      sha.add("unbound");
      continue;
    }
    sha.add(to_string(TensorMeta::of(tensor)));
    if (tensor.is_meta() || is_metadata_example(tensor)) continue;  // no data: its metadata is all there is
    const at::Tensor data = tensor.detach().to(c10::kCPU).contiguous();
    sha.add(data.data_ptr(), data.nbytes());
  }
  return sha.hex();
}

std::string program_ingredient(const Graph& graph) {
  return fmt::format("graph {} constants {}", content_hash_hex(canonical_graph_text(graph)), constants_digest(graph));
}

// Whether every stage of `pipeline_text` is built in (else the key cannot name what the stages
// do). Remembered per text: every lookup asks, and a process has few pipelines.
bool is_built_in_pipeline(std::string_view pipeline_text) {
  static std::mutex mutex;
  static std::unordered_map<std::string, bool> known;
  std::lock_guard lock(mutex);
  auto it = known.find(std::string(pipeline_text));
  if (it != known.end()) return it->second;
  bool built_in = true;
  try {
    (void)compile_stage_registry().parse(pipeline_text, "aot");
  } catch (const std::exception&) { built_in = false; }
  return known.emplace(std::string(pipeline_text), built_in).first->second;
}

}  // namespace

std::string content_hash_hex(std::string_view bytes) {
  Hasher sha;
  sha.add(bytes.data(), bytes.size());
  return sha.hex();
}

std::string canonical_graph_text(const Graph& graph) { return print_graph_canonical(graph); }

std::string cache_key_digest(const std::vector<std::pair<std::string, std::string>>& ingredients) {
  Hasher sha;
  for (const auto& [name, value] : ingredients) {
    sha.add(name);
    sha.add(value);
  }
  return sha.hex();
}

std::string CacheKey::explain() const {
  std::string text;
  for (const auto& [name, value] : ingredients) text += fmt::format("{}: {}\n", name, value);
  text += fmt::format("key: {}\n", digest);
  return text;
}

namespace {
// The table's identity and the ops it replaces.
std::string decompositions_ingredient(const AotConfig& config) {
  std::string ops;
  for (const auto& [op, decomposition] : config.decompositions) ops += (ops.empty() ? "" : ",") + op;
  return fmt::format("{} [{}]", config.decompositions_identity, ops);
}
}  // namespace

ConfigIngredients config_key_ingredients(const AotConfig& config, std::string_view pipeline_text) {
  ConfigIngredients out;
  if (!is_built_in_pipeline(pipeline_text)) {
    out.bypass_reason = fmt::format("the pipeline '{}' has stages that are not built in", pipeline_text);
    return out;
  }
  const AotConfig resolved = resolve_defaults(config);
  const auto fw_id = identity_of(resolved.fw_compiler);
  const auto bw_id = identity_of(resolved.bw_compiler);
  const auto inference_id = identity_of(resolved.inference_compiler);
  const auto partitioner_id = identity_of(resolved.partition_fn);
  for (const auto& [what, id] :
       {std::pair{"fw_compiler", &fw_id}, std::pair{"bw_compiler", &bw_id},
        std::pair{"inference_compiler", &inference_id}, std::pair{"partition_fn", &partitioner_id}})
    if (!*id) {
      out.bypass_reason = fmt::format(
          "{} has no stable identity (a plain callable); wrap it with named_compiler / named_partitioner to cache it",
          what);
      return out;
    }
  if (!config.decompositions.empty() && config.decompositions_identity.empty()) {
    out.bypass_reason =
        "the config's decompositions have no identity; set decompositions_identity to cache compiles that use them";
    return out;
  }
  out.ingredients = {
      {"pipeline", std::string(pipeline_text)},
      {"partition_fn", *partitioner_id},
      {"fw_compiler", *fw_id},
      {"bw_compiler", *bw_id},
      {"inference_compiler", *inference_id},
      {"num_params_buffers", std::to_string(config.num_params_buffers)},
      {"keep_inference_input_mutations", config.keep_inference_input_mutations ? "true" : "false"},
      {"allow_cpu_fallback", config.allow_cpu_fallback ? "true" : "false"},
      {"aotpipe", std::string(aotpipe_build_id())},
      {"libtorch", TORCH_VERSION},
      {"artifact_schema", std::to_string(artifact_schema_version())},
  };
  // Only where a table is set: keys of compiles without one stay as they were.
  if (!config.decompositions.empty()) out.ingredients.emplace_back("decompositions", decompositions_ingredient(config));
  return out;
}

CacheKeyOrBypass make_cache_key(const Graph* program, const Function& fn, const TensorList& args,
                                const AotConfig& config, std::string_view pipeline_text) {
  CacheKeyOrBypass out;
  ConfigIngredients configured = config_key_ingredients(config, pipeline_text);
  if (!configured.ok()) {
    out.bypass_reason = std::move(configured.bypass_reason);
    return out;
  }

  std::string program_text;
  if (program) {
    program_text = program_ingredient(*program);
  } else {
    try {
      TraceOptions options;
      options.eliminate_dead_code = false;
      options.graph_name = "g";
      program_text = "traced " + program_ingredient(trace(fn, args, std::move(options)));
    } catch (const std::exception& e) {
      out.bypass_reason =
          fmt::format("the function does not trace on fake tensors for its cache key: {}", error_text(e));
      return out;
    }
  }

  CacheKey key;
  key.ingredients = {
      {"program", std::move(program_text)},
      {"inputs", input_signature(args)},
      {"grad_mode", grad_mode_ingredient()},
  };
  std::move(configured.ingredients.begin(), configured.ingredients.end(), std::back_inserter(key.ingredients));
  key.digest = cache_key_digest(key.ingredients);
  out.key = std::move(key);
  return out;
}

// Written by hand, not with fmt: every call of a CompiledFunction and every cache lookup makes one.
std::string input_signature(const TensorList& args) {
  std::string key = at::GradMode::is_enabled() ? "g1" : "g0";
  // A trace under autocast records its casts: a graph traced with it on must not serve a call with
  // it off, nor the other way round (torch.compile guards on it). Nothing when it is off, so keys
  // made without it are as they were.
  if (const std::string autocast = ambient_autocast_text(); !autocast.empty()) key += "|ac" + autocast;
  key.reserve(32 * args.size() + 2);
  std::unordered_map<const void*, std::size_t> first_impl, first_storage, first_base;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const at::Tensor& t = args[i];
    if (!t.defined()) {
      key += "|u";
      continue;
    }
    const std::size_t dup = first_impl.emplace(t.unsafeGetTensorImpl(), i).first->second;
    const std::size_t alias = first_storage.emplace(t.storage().unsafeGetStorageImpl(), i).first->second;
    const void* base = t.is_view() ? static_cast<const void*>(t._base().unsafeGetTensorImpl()) : nullptr;
    const std::size_t base_group = base ? first_base.emplace(base, i).first->second : i;
    key += '|';
    append_int(key, static_cast<int>(t.scalar_type()));
    const c10::Device device = t.device();
    if (device.is_cpu())
      key += "cpu";
    else
      key += device.str();
    if (t.layout() != at::kStrided) key += 'L';
    key += 's';
    append_ints(key, t.sizes(), ",");
    key += 't';
    append_ints(key, t.strides(), ",");
    key += 'o';
    append_int(key, t.storage_offset());
    key += t.requires_grad() ? "r1" : "r0";
    key += t.is_leaf() ? "l1" : "l0";
    key += 'd';
    append_int(key, static_cast<int64_t>(dup));
    key += 'a';
    append_int(key, static_cast<int64_t>(alias));
    key += 'b';
    append_int(key, static_cast<int64_t>(base_group));
  }
  return key;
}

std::string grad_mode_ingredient() { return at::GradMode::is_enabled() ? "enabled" : "disabled"; }

}  // namespace aotpipe
