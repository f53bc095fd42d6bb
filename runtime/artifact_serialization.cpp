// CompiledArtifact <-> bytes: [CBOR length (8 bytes)][CBOR][tensor data]. CBOR (nlohmann)
// holds the structure; graphs travel in the text form (graph/printer.h, read back by
// graph/parser.h); tensor constants are records pointing into the raw data that follows (CBOR
// byte strings would be copied a byte at a time), each stored once however many graphs hold it. Reading trusts nothing: every field is type-checked, every index
// range-checked, every graph verified, and any failure is an ArtifactFormatError.
#include <aotpipe/graph/example_tensor.h>
#include <aotpipe/graph/parser.h>
#include <aotpipe/graph/printer.h>
#include <aotpipe/graph/verifier.h>
#include <aotpipe/runtime/compiled_artifact.h>
#include <aotpipe/stages/joint/joint.h>

#include <ATen/ATen.h>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <array>
#include <cstring>
#include <unordered_map>

namespace aotpipe {
namespace {

using Json = nlohmann::json;

constexpr int kArtifactSchema = 1;  // bump on any change of the layout below

[[noreturn]] void malformed(const std::string& what) { throw ArtifactFormatError("malformed artifact: " + what); }

void check(bool ok, const std::string& what) {
  if (!ok) malformed(what);
}

// nlohmann's CBOR reader recurses once per nesting level, so a crafted entry (a checksum only
// catches accidents) nested a million deep would exhaust the stack. This DOM builder stops at a
// depth no artifact reaches (the deepest is about 6).
constexpr std::size_t kMaxCborDepth = 64;

class DepthLimitedCborParser : public nlohmann::detail::json_sax_dom_parser<Json> {
 public:
  using Base = nlohmann::detail::json_sax_dom_parser<Json>;
  explicit DepthLimitedCborParser(Json& result) : Base(result, /*allow_exceptions=*/true) {}
  bool start_object(std::size_t n) { return enter() && Base::start_object(n); }
  bool end_object() { return leave() && Base::end_object(); }
  bool start_array(std::size_t n) { return enter() && Base::start_array(n); }
  bool end_array() { return leave() && Base::end_array(); }

 private:
  bool enter() {
    if (++depth_ > kMaxCborDepth) malformed(fmt::format("nested deeper than {} levels", kMaxCborDepth));
    return true;
  }
  bool leave() {
    --depth_;
    return true;
  }
  std::size_t depth_ = 0;
};

Json parse_cbor(std::string_view bytes) {
  Json result;
  DepthLimitedCborParser parser(result);
  Json::sax_parse(bytes.begin(), bytes.end(), &parser, nlohmann::json::input_format_t::cbor);
  return result;
}

// --- Tensors ------------------------------------------------------------------------------------

Json meta_to_json(const TensorMeta& m) {
  return {{"sizes", m.sizes},           {"strides", m.strides},
          {"offset", m.storage_offset}, {"dtype", dtype_torch_name(m.dtype)},
          {"device", m.device.str()},   {"requires_grad", m.requires_grad}};
}

TensorMeta meta_from_json(const Json& j) {
  TensorMeta m;
  m.sizes = j.at("sizes").get<std::vector<int64_t>>();
  m.strides = j.at("strides").get<std::vector<int64_t>>();
  m.storage_offset = j.at("offset").get<int64_t>();
  const auto dtype = dtype_from_torch_name(j.at("dtype").get<std::string>());
  check(dtype.has_value(), "unknown dtype " + j.at("dtype").get<std::string>());
  m.dtype = *dtype;
  m.device = c10::Device(j.at("device").get<std::string>());
  m.requires_grad = j.at("requires_grad").get<bool>();
  check(m.sizes.size() == m.strides.size() && m.storage_offset >= 0, "tensor metadata with inconsistent rank");
  for (std::size_t d = 0; d < m.sizes.size(); ++d)
    check(m.sizes[d] >= 0 && m.strides[d] >= 0, "negative size or stride");
  return m;
}

// Elements of storage a strided tensor reaches from its offset.
int64_t storage_span(const TensorMeta& m) {
  int64_t span = 1;
  for (std::size_t d = 0; d < m.sizes.size(); ++d) {
    if (m.sizes[d] == 0) return 0;
    span += (m.sizes[d] - 1) * m.strides[d];
  }
  return span;
}

// Tensor constants, each stored once however many graphs hold it: a record (metadata, where its
// contiguous data lies in `data`) per tensor.
class TensorWriter {
 public:
  std::size_t add(const at::Tensor& t) {
    auto [it, fresh] = index_.emplace(t.unsafeGetTensorImpl(), records_.size());
    if (!fresh) return it->second;
    Json record = meta_to_json(TensorMeta::of(t));
    if (t.is_meta() || is_metadata_example(t)) {  // no data (a compile for a device this host lacks)
      record["data"] = nullptr;
    } else {
      const at::Tensor contiguous = t.detach().to(c10::kCPU).contiguous();
      record["data"] = {data_.size(), contiguous.nbytes()};
      data_.append(static_cast<const char*>(contiguous.data_ptr()), contiguous.nbytes());
    }
    records_.push_back(std::move(record));
    return it->second;
  }
  Json take_records() { return std::move(records_); }
  const std::string& data() const { return data_; }

 private:
  std::unordered_map<const c10::TensorImpl*, std::size_t> index_;
  Json records_ = Json::array();
  std::string data_;
};

at::Tensor tensor_from_json(const Json& j, std::string_view data_section) {
  const TensorMeta m = meta_from_json(j);
  const auto options = at::TensorOptions().dtype(m.dtype);
  const Json& data = j.at("data");
  if (data.is_null()) {
    if (m.device.is_meta()) return at::empty_strided(m.sizes, m.strides, options.device(c10::kMeta));
    return metadata_example(m);
  }
  const auto offset = data.at(0).get<std::uint64_t>();
  const auto length = data.at(1).get<std::uint64_t>();
  check(offset <= data_section.size() && length <= data_section.size() - offset, "tensor data out of bounds");
  const std::string_view bytes = data_section.substr(offset, length);
  const int64_t numel = m.numel();
  check(static_cast<int64_t>(bytes.size()) == numel * static_cast<int64_t>(c10::elementSize(m.dtype)),
        "tensor data of the wrong length");
  at::Tensor storage = at::empty({m.storage_offset + storage_span(m)}, options);
  at::Tensor t = storage.as_strided(m.sizes, m.strides, m.storage_offset);
  if (numel > 0) {
    at::Tensor source = at::empty(m.sizes, options);
    std::memcpy(source.data_ptr(), bytes.data(), bytes.size());
    t.copy_(source);
  }
  if (!m.device.is_cpu()) t = t.to(m.device);
  if (m.requires_grad) t.requires_grad_(true);
  return t;
}

// --- Graphs -------------------------------------------------------------------------------------

Json graph_to_json(const Graph& g, TensorWriter& tensors) {
  Json constants = Json::object();
  for (const auto& [key, tensor] : g.tensor_constants())
    if (tensor.defined()) constants[key] = tensors.add(tensor);
  return {{"text", print_graph(g)}, {"constants", std::move(constants)}};
}

Graph graph_from_json(const Json& j, const std::vector<at::Tensor>& tensors, std::string_view what) {
  Graph g;
  try {
    g = parse_graph(j.at("text").get_ref<const std::string&>());
  } catch (const ParseError& e) { malformed(fmt::format("{} graph does not parse: {}", what, e.what())); }
  for (const auto& [key, index] : j.at("constants").items()) {
    const auto i = index.get<std::size_t>();
    check(i < tensors.size(), fmt::format("{} graph: constant '{}' refers to a missing tensor", what, key));
    g.bind_constant(key, tensors[i]);
  }
  VerifyOptions options;
  options.require_tensor_meta = false;
  options.allow_dead_code = true;
  options.require_bound_constants = true;
  try {
    verify(g, options);
  } catch (const std::exception& e) { malformed(fmt::format("{} graph does not verify: {}", what, e.what())); }
  return g;
}

// --- Metadata -----------------------------------------------------------------------------------

constexpr std::array kOutputTypes = {
    OutputType::non_alias,
    OutputType::alias_of_input,
    OutputType::is_input,
    OutputType::alias_of_intermediate_save_as_output,
    OutputType::alias_of_intermediate,
    OutputType::alias_of_intermediate_base_is_user_output,
    OutputType::unsafe_view_alias,
    OutputType::custom_function_view,
};

OutputType output_type_from(const std::string& name) {
  for (OutputType t : kOutputTypes)
    if (to_string(t) == name) return t;
  malformed("unknown output type " + name);
}

Json input_info_to_json(const InputAliasInfo& in) {
  return Json::array({in.is_leaf, in.mutates_data, in.mutates_metadata, in.mutations_hidden_from_autograd,
                      in.mutations_under_no_grad_or_inference_mode, in.mutates_storage_metadata, in.requires_grad,
                      in.keep_input_mutations});
}

InputAliasInfo input_info_from_json(const Json& j) {
  check(j.is_array() && j.size() == 8, "input alias info is not 8 flags");
  InputAliasInfo in;
  in.is_leaf = j[0].get<bool>();
  in.mutates_data = j[1].get<bool>();
  in.mutates_metadata = j[2].get<bool>();
  in.mutations_hidden_from_autograd = j[3].get<bool>();
  in.mutations_under_no_grad_or_inference_mode = j[4].get<bool>();
  in.mutates_storage_metadata = j[5].get<bool>();
  in.requires_grad = j[6].get<bool>();
  in.keep_input_mutations = j[7].get<bool>();
  return in;
}

Json meta_to_json(const ViewAndMutationMeta& m, TensorWriter& tensors) {
  Json inputs = Json::array(), outputs = Json::array(), tangents = Json::array();
  for (const InputAliasInfo& in : m.input_info) inputs.push_back(input_info_to_json(in));
  for (const OutputAliasInfo& out : m.output_info)
    outputs.push_back(
        {{"type", std::string(to_string(out.output_type))},
         {"base_idx", out.base_idx ? Json(*out.base_idx) : Json(nullptr)},
         {"requires_grad", out.requires_grad},
         {"meta", meta_to_json(out.meta)},
         {"view_replay", out.view_replay ? graph_to_json(out.view_replay->graph(), tensors) : Json(nullptr)}});
  for (const TensorMeta& t : m.traced_tangents) tangents.push_back(meta_to_json(t));
  return {{"input_info", std::move(inputs)},
          {"output_info", std::move(outputs)},
          {"num_intermediate_bases", m.num_intermediate_bases},
          {"keep_input_mutations", m.keep_input_mutations},
          {"traced_tangents", std::move(tangents)},
          {"is_train", m.is_train},
          {"grad_enabled_mutation", m.grad_enabled_mutation ? Json(*m.grad_enabled_mutation) : Json(nullptr)}};
}

ViewAndMutationMeta meta_from_json(const Json& j, const std::vector<at::Tensor>& tensors) {
  ViewAndMutationMeta m;
  for (const Json& in : j.at("input_info")) m.input_info.push_back(input_info_from_json(in));
  m.num_intermediate_bases = j.at("num_intermediate_bases").get<std::size_t>();
  for (const Json& o : j.at("output_info")) {
    OutputAliasInfo out;
    out.output_type = output_type_from(o.at("type").get<std::string>());
    if (!o.at("base_idx").is_null()) out.base_idx = o.at("base_idx").get<std::size_t>();
    out.requires_grad = o.at("requires_grad").get<bool>();
    out.meta = meta_from_json(o.at("meta"));
    if (!o.at("view_replay").is_null())
      out.view_replay = ViewReplay(graph_from_json(o.at("view_replay"), tensors, "view replay"));
    m.output_info.push_back(std::move(out));
  }
  m.keep_input_mutations = j.at("keep_input_mutations").get<bool>();
  for (const Json& t : j.at("traced_tangents")) m.traced_tangents.push_back(meta_from_json(t));
  m.is_train = j.at("is_train").get<bool>();
  if (!j.at("grad_enabled_mutation").is_null()) m.grad_enabled_mutation = j.at("grad_enabled_mutation").get<bool>();
  // Where each aliased output's base is: the runtime indexes with these.
  for (std::size_t k = 0; k < m.output_info.size(); ++k) {
    const OutputAliasInfo& out = m.output_info[k];
    std::size_t bound = 0;
    switch (out.output_type) {
      case OutputType::alias_of_input:
      case OutputType::is_input: bound = m.input_info.size(); break;
      case OutputType::alias_of_intermediate:
      case OutputType::alias_of_intermediate_save_as_output: bound = m.num_intermediate_bases; break;
      case OutputType::alias_of_intermediate_base_is_user_output: bound = k; break;
      default: continue;
    }
    check(out.base_idx && *out.base_idx < bound, fmt::format("output {} has no valid base index", k));
  }
  try {
    for (const InputAliasInfo& in : m.input_info) (void)in.mutation_type();
  } catch (const std::exception& e) { malformed(fmt::format("input metadata: {}", e.what())); }
  m.finalize();  // the derived lists are recomputed, never read
  return m;
}

// --- Runtime plans ------------------------------------------------------------------------------

Json plan_to_json(const RuntimePlan& plan) {
  if (const auto* d = std::get_if<DedupeInfo>(&plan))
    return {{"dedupe",
             {{"specialized", d->specialized},
              {"keep_arg_mask", d->keep_arg_mask},
              {"add_dupe_map", d->add_dupe_map},
              {"first_occurrence", d->first_occurrence}}}};
  const auto& s = std::get<SyntheticBaseInfo>(plan);
  Json outer = Json::array();
  for (const InputAliasInfo& in : s.outer_input_info) outer.push_back(input_info_to_json(in));
  return {{"synthetic_base",
           {{"needed", s.needed},
            {"is_inference", s.is_inference},
            {"outer_input_info", std::move(outer)},
            {"aliased_with_metadata_mutations", s.aliased_arg_idx_with_metadata_mutations}}}};
}

RuntimePlan plan_from_json(const Json& j) {
  if (j.contains("dedupe")) {
    const Json& d = j.at("dedupe");
    DedupeInfo info;
    info.specialized = d.at("specialized").get<bool>();
    info.keep_arg_mask = d.at("keep_arg_mask").get<std::vector<bool>>();
    info.add_dupe_map = d.at("add_dupe_map").get<std::vector<std::size_t>>();
    info.first_occurrence = d.at("first_occurrence").get<std::vector<std::size_t>>();
    const std::size_t n = info.first_occurrence.size();
    check(info.keep_arg_mask.size() == n && info.add_dupe_map.size() == n, "dedupe plan of inconsistent lengths");
    std::size_t kept = 0;
    for (bool keep : info.keep_arg_mask) kept += keep ? 1 : 0;
    for (std::size_t i = 0; i < n; ++i)
      check(info.first_occurrence[i] <= i && info.add_dupe_map[i] < (info.specialized ? kept : n),
            "dedupe plan index out of range");
    return info;
  }
  const Json& s = j.at("synthetic_base");
  SyntheticBaseInfo info;
  info.needed = s.at("needed").get<bool>();
  info.is_inference = s.at("is_inference").get<bool>();
  for (const Json& in : s.at("outer_input_info")) info.outer_input_info.push_back(input_info_from_json(in));
  info.aliased_arg_idx_with_metadata_mutations =
      s.at("aliased_with_metadata_mutations").get<std::vector<std::size_t>>();
  for (std::size_t i : info.aliased_arg_idx_with_metadata_mutations)
    check(i < info.outer_input_info.size(), "synthetic base plan index out of range");
  return info;
}

// The graphs' arities against the metadata the runtime indexes them with.
void check_consistent(const CompiledArtifact& a) {
  const std::size_t num_inputs = a.meta.input_info.size();
  check(a.input_devices.size() == num_inputs, "one input device per input expected");
  const TracedProgram& t = a.traced;
  if (!t.joint) {
    check(t.inference_graph != nullptr, "an inference artifact without its graph");
    check(t.inference_graph->inputs().size() == num_inputs, "inference graph inputs differ from the metadata");
    check(t.inference_graph->outputs().size() == a.meta.num_forward_returns,
          "inference graph outputs differ from the metadata");
    return;
  }
  check(a.partition != nullptr, "a training artifact without its partition");
  const PartitionResult& p = *a.partition;
  std::size_t num_tangents = 0;
  for (bool t : forward_tangent_mask(a.meta)) num_tangents += t ? 1 : 0;
  check(p.forward.inputs().size() == num_inputs, "forward graph inputs differ from the metadata");
  check(p.forward.outputs().size() == a.meta.num_forward_returns + p.saved_values.size(),
        "forward graph outputs differ from the metadata");
  check(p.backward.inputs().size() == p.saved_values.size() + num_tangents, "backward graph inputs differ");
  check(p.backward.outputs().size() == t.grad_inputs.size(), "backward graph outputs differ from the gradients");
  for (std::size_t i : t.grad_inputs) check(i < num_inputs, "gradient of a missing input");
  for (std::size_t k : t.undefined_grads) check(k < t.grad_inputs.size(), "undefined gradient out of range");
}

}  // namespace

int artifact_schema_version() { return kArtifactSchema; }

std::string serialize_artifact(const CompiledArtifact& a) {
  TensorWriter tensors;
  Json j;
  j["schema"] = kArtifactSchema;
  j["name"] = a.name;
  Json wrappers = Json::array();
  for (const RuntimePlan& plan : a.wrappers) wrappers.push_back(plan_to_json(plan));
  j["wrappers"] = std::move(wrappers);
  j["meta"] = meta_to_json(a.meta, tensors);
  const TracedProgram& t = a.traced;
  j["trace_joint"] = a.training();
  j["joint"] = t.joint ? Json{{"graph", graph_to_json(t.joint->graph, tensors)},
                              {"num_primals", t.joint->num_primals},
                              {"num_fwd_outputs", t.joint->num_fwd_outputs}}
                       : Json(nullptr);
  if (a.partition) {
    const PartitionResult& p = *a.partition;
    j["partition"] = {{"forward", graph_to_json(p.forward, tensors)},
                      {"backward", graph_to_json(p.backward, tensors)},
                      {"num_fwd_outputs", p.num_fwd_outputs},
                      {"saved_values", p.saved_values},
                      {"saved_bytes", p.saved_bytes},
                      {"recomputed", p.recomputed}};
  } else {
    j["partition"] = nullptr;
  }
  j["inference_graph"] = t.inference_graph ? graph_to_json(*t.inference_graph, tensors) : Json(nullptr);
  j["grad_inputs"] = t.grad_inputs;
  j["undefined_grads"] = t.undefined_grads;
  Json devices = Json::array();
  for (const c10::Device& d : a.input_devices) devices.push_back(d.str());
  j["input_devices"] = std::move(devices);
  j["cpu_fallbacks"] = a.cpu_fallbacks;
  j["tensors"] = tensors.take_records();
  const std::vector<std::uint8_t> cbor = Json::to_cbor(j);
  std::string bytes;
  const std::uint64_t cbor_length = cbor.size();
  bytes.reserve(sizeof cbor_length + cbor.size() + tensors.data().size());
  bytes.append(reinterpret_cast<const char*>(&cbor_length), sizeof cbor_length);
  bytes.append(reinterpret_cast<const char*>(cbor.data()), cbor.size());
  bytes += tensors.data();
  return bytes;
}

CompiledArtifact deserialize_artifact(std::string_view bytes) {
  try {
    std::uint64_t cbor_length = 0;
    check(bytes.size() >= sizeof cbor_length, "shorter than its header");
    std::memcpy(&cbor_length, bytes.data(), sizeof cbor_length);
    bytes.remove_prefix(sizeof cbor_length);
    check(cbor_length <= bytes.size(), "structure longer than the artifact");
    const std::string_view data_section = bytes.substr(cbor_length);
    const Json j = parse_cbor(bytes.substr(0, cbor_length));
    check(j.is_object(), "not an object");
    check(j.at("schema").get<int>() == kArtifactSchema,
          fmt::format("schema {} (this build reads {})", j.at("schema").dump(), kArtifactSchema));
    std::vector<at::Tensor> tensors;
    for (const Json& t : j.at("tensors")) tensors.push_back(tensor_from_json(t, data_section));
    CompiledArtifact a;
    a.name = j.at("name").get<std::string>();
    for (const Json& plan : j.at("wrappers")) a.wrappers.push_back(plan_from_json(plan));
    a.meta = meta_from_json(j.at("meta"), tensors);
    const bool training = j.at("trace_joint").get<bool>();
    if (const Json& joint = j.at("joint"); !joint.is_null()) {
      a.traced.joint = std::make_shared<const JointGraph>(
          JointGraph{graph_from_json(joint.at("graph"), tensors, "joint"), joint.at("num_primals").get<std::size_t>(),
                     joint.at("num_fwd_outputs").get<std::size_t>()});
    }
    check(training == a.training(),
          training ? "a training artifact without its joint graph" : "an inference artifact with a joint graph");
    if (const Json& p = j.at("partition"); !p.is_null()) {
      PartitionResult r;
      r.forward = graph_from_json(p.at("forward"), tensors, "forward");
      r.backward = graph_from_json(p.at("backward"), tensors, "backward");
      r.num_fwd_outputs = p.at("num_fwd_outputs").get<std::size_t>();
      r.saved_values = p.at("saved_values").get<std::vector<std::string>>();
      r.saved_bytes = p.at("saved_bytes").get<int64_t>();
      r.recomputed = p.at("recomputed").get<std::vector<std::string>>();
      a.partition = std::make_shared<const PartitionResult>(std::move(r));
    }
    if (const Json& g = j.at("inference_graph"); !g.is_null())
      a.traced.inference_graph = std::make_shared<const Graph>(graph_from_json(g, tensors, "inference"));
    a.traced.grad_inputs = j.at("grad_inputs").get<std::vector<std::size_t>>();
    a.traced.undefined_grads = j.at("undefined_grads").get<std::vector<std::size_t>>();
    for (const Json& d : j.at("input_devices")) a.input_devices.emplace_back(d.get<std::string>());
    a.cpu_fallbacks = j.at("cpu_fallbacks").get<CpuFallbackCounts>();
    check_consistent(a);
    return a;
  } catch (const ArtifactFormatError&) {
    throw;
  } catch (const std::exception& e) {  // nlohmann's type/parse errors, c10::Error (devices), ...
    malformed(e.what());
  }
}

}  // namespace aotpipe
