// CompiledArtifact <-> bytes: [header length (8 bytes)][header][data].
//   header: the binary form of byte_codec.h: the schema, where the graph records lie in the
//           data, then everything post_compile needs (plans, metadata, devices, counts). A
//           cache hit reads this and nothing else.
//   data:   the graphs in the text form (graph/printer.h, read back by graph/parser.h), the
//           tensor constants' bytes (each stored once however many graphs hold it), and the
//           graph records: a CBOR document (nlohmann) that says which text and which tensors
//           make each graph, read when a graph is first needed.
// Reading trusts nothing: every field is type-checked, every index range-checked, every graph
// verified, and any failure is an ArtifactFormatError.
#include <aotpipe/runtime/artifact_serialization.h>
#include <aotpipe/graph/error_text.h>

#include <aotpipe/graph/byte_codec.h>
#include <aotpipe/graph/checked_json.h>
#include <aotpipe/graph/example_tensor.h>
#include <aotpipe/graph/parser.h>
#include <aotpipe/graph/printer.h>
#include <aotpipe/graph/verifier.h>
#include <aotpipe/stages/common/plan_codec.h>
#include <aotpipe/stages/joint/joint.h>

#include <ATen/ATen.h>
#include <c10/core/InferenceMode.h>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <cstring>
#include <mutex>
#include <unordered_map>

namespace aotpipe {
namespace {

using Json = CheckedJson;  // numbers read exactly or refused (graph/checked_json.h)

constexpr int kArtifactSchema = 4;  // bump on any change of the layout below

[[noreturn]] void malformed(const std::string& what) { throw ArtifactFormatError("malformed artifact: " + what); }

// The bytes at [offset, offset + length) of the data section, checked against it.
std::string_view section_of(std::uint64_t offset, std::uint64_t length, std::string_view data, std::string_view what);
std::string_view section_of(const Json& record, std::string_view data, std::string_view what);

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

// A device string of an entry; c10's parse error is a format error like any other.
c10::Device device_from(const std::string& text) {
  try {
    return c10::Device(text);
  } catch (const std::exception& e) { malformed(fmt::format("device '{}': {}", text, error_text(e))); }
}

// `m` read from an entry, once its rank, sizes, strides and offset are consistent.
TensorMeta checked(TensorMeta m) {
  check(m.sizes.size() == m.strides.size() && m.storage_offset >= 0, "tensor metadata with inconsistent rank");
  for (std::size_t d = 0; d < m.sizes.size(); ++d)
    check(m.sizes[d] >= 0 && m.strides[d] >= 0, "negative size or stride");
  return m;
}

TensorMeta meta_from_json(const Json& j) {
  TensorMeta m;
  m.sizes = j.at("sizes").get<std::vector<int64_t>>();
  m.strides = j.at("strides").get<std::vector<int64_t>>();
  m.storage_offset = j.at("offset").get<int64_t>();
  const auto dtype = dtype_from_torch_name(j.at("dtype").get<std::string>());
  check(dtype.has_value(), "unknown dtype " + j.at("dtype").get<std::string>());
  m.dtype = *dtype;
  m.device = device_from(j.at("device").get<std::string>());
  m.requires_grad = j.at("requires_grad").get<bool>();
  return checked(std::move(m));
}

// Elements of storage a strided tensor reaches from its offset, and its element count; both
// overflow-checked (the metadata is untrusted).
int64_t storage_span(const TensorMeta& m) {
  int64_t span = 1;
  for (std::size_t d = 0; d < m.sizes.size(); ++d) {
    if (m.sizes[d] == 0) return 0;
    int64_t reach = 0;
    check(!__builtin_mul_overflow(m.sizes[d] - 1, m.strides[d], &reach) && !__builtin_add_overflow(span, reach, &span),
          "tensor metadata whose extent overflows");
  }
  return span;
}

int64_t checked_numel(const TensorMeta& m) {
  int64_t numel = 1;
  for (int64_t size : m.sizes)
    check(!__builtin_mul_overflow(numel, size, &numel), "tensor metadata whose size overflows");
  return numel;
}

// The data section as it is written: graph texts and tensor constants (each tensor once however
// many graphs hold it: a record with its metadata and where its contiguous bytes lie).
class DataWriter {
 public:
  struct Section {
    std::uint64_t offset = 0, length = 0;
  };
  Section add_bytes(std::string_view bytes) {
    const Section where{data_.size(), bytes.size()};
    data_ += bytes;
    return where;
  }
  std::size_t add_tensor(const at::Tensor& t) {
    auto [it, fresh] = index_.emplace(t.unsafeGetTensorImpl(), records_.size());
    if (!fresh) return it->second;
    Json record = meta_to_json(TensorMeta::of(t));
    if (t.is_meta() || is_metadata_example(t)) {  // no data (a compile for a device this host lacks)
      record["data"] = nullptr;
    } else {
      const at::Tensor contiguous = t.detach().to(c10::kCPU).contiguous();
      const Section where = add_bytes({static_cast<const char*>(contiguous.data_ptr()), contiguous.nbytes()});
      record["data"] = {where.offset, where.length};
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
  const std::string_view bytes = section_of(data, data_section, "tensor data");
  const int64_t numel = checked_numel(m);
  int64_t nbytes = 0, storage_elements = 0;
  check(!__builtin_mul_overflow(numel, static_cast<int64_t>(c10::elementSize(m.dtype)), &nbytes) &&
            static_cast<int64_t>(bytes.size()) == nbytes,
        "tensor data of the wrong length");
  check(!__builtin_add_overflow(m.storage_offset, storage_span(m), &storage_elements),
        "tensor metadata whose storage overflows");
  at::Tensor storage = at::empty({storage_elements}, options);
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

// The data section as it is read: the bytes (kept alive); the graphs' records (a CBOR document
// of its own in the data, parsed when a graph or tensor is first needed); the tensor constants,
// each decoded when a graph first binds it. Shared by an artifact's graph decoders; thread-safe.
class DataReader {
 public:
  DataReader(std::shared_ptr<const void> owner, std::string_view data, std::string_view graph_records)
      : owner_(std::move(owner)), data_(data), graph_records_(graph_records) {}
  std::string_view data() const { return data_; }

  // {"joint", "partition", "inference_graph", "tensors"}
  const Json& graph_records() {
    std::lock_guard lock(mutex_);
    return records_locked();
  }
  std::size_t num_tensors() {
    std::lock_guard lock(mutex_);
    return records_locked().at("tensors").size();
  }
  at::Tensor tensor(std::size_t i) {  // i < num_tensors(): the caller checks, naming the graph
    std::lock_guard lock(mutex_);
    // Decoded at a graph's first call, maybe under the caller's InferenceMode: the constants must
    // be normal tensors, as a compile's are.
    c10::InferenceMode normal_tensors(false);
    const Json& records = records_locked().at("tensors");
    if (tensors_.empty()) tensors_.resize(records.size());
    if (!tensors_.at(i).defined()) tensors_[i] = tensor_from_json(records.at(i), data_);
    return tensors_[i];
  }

 private:
  const Json& records_locked() {
    if (!records_) {
      Json records = parse_cbor(graph_records_);
      check(records.is_object() && records.at("tensors").is_array(), "graph records are not an object with tensors");
      records_.emplace(std::move(records));
    }
    return *records_;
  }
  std::shared_ptr<const void> owner_;
  std::string_view data_;
  std::string_view graph_records_;
  std::mutex mutex_;
  std::optional<Json> records_;
  std::vector<at::Tensor> tensors_;
};

std::string_view section_of(std::uint64_t offset, std::uint64_t length, std::string_view data, std::string_view what) {
  check(offset <= data.size() && length <= data.size() - offset, fmt::format("{} out of bounds", what));
  return data.substr(offset, length);
}

std::string_view section_of(const Json& record, std::string_view data, std::string_view what) {
  check(record.is_array() && record.size() == 2, fmt::format("{} is not an [offset, length] pair", what));
  return section_of(record.at(0).get<std::uint64_t>(), record.at(1).get<std::uint64_t>(), data, what);
}

// --- Graphs -------------------------------------------------------------------------------------

// Where a graph's text lies in the data section, and the tensors its constants bind.
struct GraphRecord {
  std::uint64_t offset = 0, length = 0;
  std::vector<std::pair<std::string, std::uint64_t>> constants;  // key -> tensor index
};

GraphRecord graph_record(const Graph& g, DataWriter& data) {
  GraphRecord r;
  const DataWriter::Section text = data.add_bytes(print_graph(g));
  r.offset = text.offset;
  r.length = text.length;
  for (const auto& [key, tensor] : g.tensor_constants())
    if (tensor.defined()) r.constants.emplace_back(key, data.add_tensor(tensor));
  return r;
}

Json graph_to_json(const Graph& g, DataWriter& data) {
  const GraphRecord r = graph_record(g, data);
  Json constants = Json::object();
  for (const auto& [key, index] : r.constants) constants[key] = index;
  return {{"text", {r.offset, r.length}}, {"constants", std::move(constants)}};
}

void put_graph(ByteWriter& out, const Graph& g, DataWriter& data) {
  const GraphRecord r = graph_record(g, data);
  out.u64(r.offset);
  out.u64(r.length);
  out.list(r.constants, [&](const auto& c) {
    out.str(c.first);
    out.u64(c.second);
  });
}

Graph graph_from_record(const GraphRecord& r, DataReader& data, std::string_view what) {
  const std::string_view text = section_of(r.offset, r.length, data.data(), fmt::format("{} graph text", what));
  Graph g;
  try {
    g = parse_graph(text);
  } catch (const ParseError& e) { malformed(fmt::format("{} graph does not parse: {}", what, e.what())); }
  for (const auto& [key, i] : r.constants) {
    check(i < data.num_tensors(), fmt::format("{} graph: constant '{}' refers to a missing tensor", what, key));
    at::Tensor tensor = data.tensor(i);
    try {
      g.bind_constant(key, std::move(tensor));
    } catch (const GraphError& e) { malformed(fmt::format("{} graph: constant '{}': {}", what, key, e.what())); }
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

Graph graph_from_json(const Json& j, DataReader& data, std::string_view what) {
  const Json& text = j.at("text");
  check(text.is_array() && text.size() == 2, fmt::format("{} graph text is not an [offset, length] pair", what));
  GraphRecord r{text[0].get<std::uint64_t>(), text[1].get<std::uint64_t>(), {}};
  for (const auto& [key, index] : j.at("constants").items()) r.constants.emplace_back(key, index.get<std::uint64_t>());
  return graph_from_record(r, data, what);
}

GraphRecord get_graph_record(ByteReader& in) {
  GraphRecord r;
  r.offset = in.u64("graph text offset");
  r.length = in.u64("graph text length");
  const std::size_t n = in.count("graph constants", 2);
  for (std::size_t i = 0; i < n; ++i) {
    std::string key(in.str("constant name"));
    r.constants.emplace_back(std::move(key), in.u64("constant tensor"));
  }
  return r;
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

// --- The header: ByteWriter / ByteReader (byte_codec.h) -----------------------------------------

void put_meta(ByteWriter& out, const TensorMeta& m) {
  out.i64s(m.sizes);
  out.i64s(m.strides);
  out.i64(m.storage_offset);
  out.u64(static_cast<std::uint64_t>(m.dtype));
  out.str(m.device.str());
  out.boolean(m.requires_grad);
}

TensorMeta get_meta(ByteReader& in) {
  TensorMeta m;
  m.sizes = in.i64s("tensor sizes");
  m.strides = in.i64s("tensor strides");
  m.storage_offset = in.i64("tensor offset");
  const std::uint64_t dtype = in.u64("tensor dtype");
  check(dtype < static_cast<std::uint64_t>(c10::ScalarType::NumOptions), fmt::format("unknown dtype {}", dtype));
  m.dtype = static_cast<c10::ScalarType>(dtype);
  m.device = device_from(std::string(in.str("tensor device")));
  m.requires_grad = in.boolean("tensor requires_grad");
  return checked(std::move(m));
}

// An optional as 0 (none) or value + 1.
void put_optional(ByteWriter& out, std::optional<std::size_t> v) { out.u64(v ? *v + 1 : 0); }
std::optional<std::size_t> get_optional(ByteReader& in, const char* what) {
  const std::uint64_t v = in.u64(what);
  if (v == 0) return std::nullopt;
  return static_cast<std::size_t>(v - 1);
}

void put_meta(ByteWriter& out, const ViewAndMutationMeta& m, DataWriter& data) {
  out.list(m.input_info, [&](const InputAliasInfo& in) { encode_input_alias_info(out, in); });
  out.list(m.output_info, [&](const OutputAliasInfo& o) {
    const auto type = std::find(kOutputTypes.begin(), kOutputTypes.end(), o.output_type);
    out.u64(static_cast<std::uint64_t>(type - kOutputTypes.begin()));
    put_optional(out, o.base_idx);
    out.boolean(o.requires_grad);
    put_meta(out, o.meta);
    out.boolean(o.view_replay.has_value());
    if (o.view_replay) put_graph(out, o.view_replay->graph(), data);
  });
  out.u64(m.num_intermediate_bases);
  out.boolean(m.keep_input_mutations);
  out.list(m.traced_tangents, [&](const TensorMeta& t) { put_meta(out, t); });
  out.boolean(m.is_train);
  out.u64(m.grad_enabled_mutation ? (*m.grad_enabled_mutation ? 2 : 1) : 0);
}

ViewAndMutationMeta get_meta(ByteReader& in, DataReader& data) {
  ViewAndMutationMeta m;
  m.input_info = in.list("input info", [&] { return decode_input_alias_info(in); });
  m.output_info = in.list("output info", [&] {
    OutputAliasInfo out;
    const std::uint64_t type = in.u64("output type");
    check(type < kOutputTypes.size(), fmt::format("unknown output type {}", type));
    out.output_type = kOutputTypes[type];
    out.base_idx = get_optional(in, "output base index");
    out.requires_grad = in.boolean("output requires_grad");
    out.meta = get_meta(in);
    if (in.boolean("output view replay"))
      out.view_replay = ViewReplay(graph_from_record(get_graph_record(in), data, "view replay"));
    return out;
  });
  m.num_intermediate_bases = in.u64("intermediate bases");
  m.keep_input_mutations = in.boolean("keep_input_mutations");
  m.traced_tangents = in.list("traced tangents", [&] { return get_meta(in); });
  m.is_train = in.boolean("is_train");
  const std::uint64_t grad_enabled = in.u64("grad_enabled_mutation");
  check(grad_enabled <= 2, "grad_enabled_mutation out of range");
  if (grad_enabled) m.grad_enabled_mutation = grad_enabled == 2;
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
    for (const InputAliasInfo& info : m.input_info) (void)info.mutation_type();
  } catch (const std::exception& e) { malformed(fmt::format("input metadata: {}", e.what())); }
  m.finalize();  // the derived lists are recomputed, never read
  return m;
}

// What the runtime reads without the graphs, against the metadata it indexes with.
void check_consistent_header(const CompiledArtifact& a) {
  const std::size_t num_inputs = a.meta.input_info.size();
  check(a.input_devices.size() == num_inputs, "one input device per input expected");
  for (std::size_t i : a.grad_inputs) check(i < num_inputs, "gradient of a missing input");
  for (std::size_t k : a.undefined_grads) check(k < a.grad_inputs.size(), "undefined gradient out of range");
}

// What a graph decoder checks the graphs against (not the artifact: it may be copied or gone).
struct GraphFacts {
  std::string name;
  bool training = false;
  std::size_t num_inputs = 0, num_forward_returns = 0, num_tangents = 0, num_saved = 0;
  std::vector<std::size_t> grad_inputs, undefined_grads;

  explicit GraphFacts(const CompiledArtifact& a)
      : name(a.name),
        training(a.training),
        num_inputs(a.meta.input_info.size()),
        num_forward_returns(a.meta.num_forward_returns),
        num_saved(a.num_saved),
        grad_inputs(a.grad_inputs),
        undefined_grads(a.undefined_grads) {
    if (!a.training) return;
    for (bool t : forward_tangent_mask(a.meta)) num_tangents += t ? 1 : 0;
  }

  // The graphs' arities against the metadata the runtime indexes them with.
  void check_inference_graph(const Graph& g) const {
    check(g.inputs().size() == num_inputs, "inference graph inputs differ from the metadata");
    check(g.outputs().size() == num_forward_returns, "inference graph outputs differ from the metadata");
  }
  // The graph records hold what the header says the artifact is.
  void check_records(const Json& records) const {
    const bool joint = !records.at("joint").is_null(), partition = !records.at("partition").is_null(),
               inference = !records.at("inference_graph").is_null();
    check(training == joint && training == partition && training != inference,
          training ? "a training artifact without its joint graph and partition"
                   : "an inference artifact without its graph, or with a joint graph");
  }
  void check_partition(const PartitionResult& p) const {
    check(p.saved_values.size() == num_saved, "saved values differ from the header's count");
    check(p.forward.inputs().size() == num_inputs, "forward graph inputs differ from the metadata");
    check(p.forward.outputs().size() == num_forward_returns + p.saved_values.size(),
          "forward graph outputs differ from the metadata");
    check(p.backward.inputs().size() == p.saved_values.size() + num_tangents, "backward graph inputs differ");
    check(p.backward.outputs().size() == grad_inputs.size(), "backward graph outputs differ from the gradients");
    check(p.backward_input_lifetimes.size() == p.backward.inputs().size(),
          "backward input lifetimes differ from the backward graph's inputs");
  }
};

std::vector<bool> backward_frees_input(const PartitionResult& p) {
  std::vector<bool> freed;
  for (InputLifetime l : p.backward_input_lifetimes) freed.push_back(l == InputLifetime::FreedAfterLastUse);
  return freed;
}

Json schedule_to_json(const MemorySchedule& s) {
  return {{"method", std::string(to_string(s.method))}, {"peak_before", s.peak_before}, {"peak_after", s.peak_after}};
}

MemorySchedule schedule_from_json(const Json& j) {
  MemorySchedule s;
  const std::string method = j.at("method").get<std::string>();
  const std::optional<ScheduleMethod> known = schedule_method_from_string(method);
  check(known.has_value(), "unknown memory schedule '" + method + "'");
  s.method = *known;
  s.peak_before = j.at("peak_before").get<std::size_t>();
  s.peak_after = j.at("peak_after").get<std::size_t>();
  return s;
}

// Runs a graph decoder. A malformed graph (ArtifactFormatError, or a record of the wrong JSON
// shape) is reported to `on_malformed` and rethrown naming the artifact and where it came from;
// anything else (out of memory, a device this process lacks) passes unchanged: it says nothing
// about the entry.
template <typename F>
auto decoding(const std::string& origin, const std::string& name, const std::function<void()>& on_malformed,
              F&& decode) {
  std::string why;
  try {
    return decode();
  } catch (const ArtifactFormatError& e) { why = e.what(); } catch (const nlohmann::json::exception& e) {
    why = "malformed artifact: " + std::string(e.what());
  }
  if (on_malformed) on_malformed();
  throw ArtifactFormatError(fmt::format("{} ({}): {}", origin, name, why));
}

}  // namespace

int artifact_schema_version() { return kArtifactSchema; }

std::string serialize_artifact(const CompiledArtifact& a) {
  DataWriter data;
  ByteWriter h;  // the header after the schema and the graph records' place
  h.str(a.name);
  h.list(a.wrappers, [&](const RuntimePlan& plan) { encode_runtime_plan(h, plan); });
  put_meta(h, a.meta, data);
  h.boolean(a.training);
  h.u64s(a.grad_inputs);
  h.u64s(a.undefined_grads);
  h.u64(a.num_saved);
  h.list(a.input_devices, [&](const c10::Device& d) { h.str(d.str()); });
  h.u64(a.cpu_fallbacks.size());
  for (const auto& [op, calls] : a.cpu_fallbacks) {
    h.str(op);
    h.u64(calls);
  }
  h.list(a.backend_notes, [&](const std::string& note) { h.str(note); });
  // The graphs' records: a CBOR document of their own in the data, read only when a graph is.
  const TracedProgram& t = a.traced();
  Json graphs;
  graphs["joint"] = t.joint ? Json{{"graph", graph_to_json(t.joint->graph, data)},
                                   {"num_primals", t.joint->num_primals},
                                   {"num_fwd_outputs", t.joint->num_fwd_outputs}}
                            : Json(nullptr);
  if (const auto& partition = a.partition()) {
    const PartitionResult& p = *partition;
    graphs["partition"] = {{"forward", graph_to_json(p.forward, data)},
                           {"backward", graph_to_json(p.backward, data)},
                           {"num_fwd_outputs", p.num_fwd_outputs},
                           {"saved_values", p.saved_values},
                           {"saved_bytes", p.saved_bytes},
                           {"recomputed", p.recomputed},
                           {"partitioner", p.partitioner},
                           {"backward_frees_input", backward_frees_input(p)},
                           {"forward_schedule", schedule_to_json(p.forward_schedule)},
                           {"backward_schedule", schedule_to_json(p.backward_schedule)}};
  } else {
    graphs["partition"] = nullptr;
  }
  graphs["inference_graph"] = t.inference_graph ? graph_to_json(*t.inference_graph, data) : Json(nullptr);
  graphs["tensors"] = data.take_records();
  const std::vector<std::uint8_t> graphs_cbor = Json::to_cbor(graphs);
  const DataWriter::Section records =
      data.add_bytes({reinterpret_cast<const char*>(graphs_cbor.data()), graphs_cbor.size()});
  ByteWriter start;
  start.u64(kArtifactSchema);
  start.u64(records.offset);
  start.u64(records.length);
  const std::string header = start.take() + h.take();
  std::string bytes;
  const std::uint64_t header_length = header.size();
  bytes.reserve(sizeof header_length + header.size() + data.data().size());
  bytes.append(reinterpret_cast<const char*>(&header_length), sizeof header_length);
  bytes += header;
  bytes += data.data();
  return bytes;
}

CompiledArtifact deserialize_artifact(std::shared_ptr<const void> owner, std::string_view bytes,
                                      const std::string& origin, std::function<void()> on_malformed_graph) {
  try {
    std::uint64_t header_length = 0;
    check(bytes.size() >= sizeof header_length, "shorter than its header");
    std::memcpy(&header_length, bytes.data(), sizeof header_length);
    bytes.remove_prefix(sizeof header_length);
    check(header_length <= bytes.size(), "header longer than the artifact");
    ByteReader in(bytes.substr(0, header_length));
    const std::string_view data_section = bytes.substr(header_length);
    const std::uint64_t schema = in.u64("schema");
    check(schema == kArtifactSchema, fmt::format("schema {} (this build reads {})", schema, kArtifactSchema));
    const std::uint64_t records_offset = in.u64("graph records offset");
    const std::string_view graph_records =
        section_of(records_offset, in.u64("graph records length"), data_section, "graph records");
    auto data = std::make_shared<DataReader>(std::move(owner), data_section, graph_records);
    CompiledArtifact a;
    a.name = in.str("name");
    a.wrappers = in.list("runtime plans", [&] { return decode_runtime_plan(in); });
    a.meta = get_meta(in, *data);
    a.training = in.boolean("training");
    a.grad_inputs = in.u64s("grad_inputs");
    a.undefined_grads = in.u64s("undefined_grads");
    a.num_saved = in.u64("num_saved");
    a.input_devices = in.list("input devices", [&] { return device_from(std::string(in.str("input device"))); });
    const std::size_t fallbacks = in.count("cpu fallbacks", 2);
    for (std::size_t i = 0; i < fallbacks; ++i) {
      std::string op(in.str("cpu fallback op"));
      a.cpu_fallbacks[std::move(op)] = in.u64("cpu fallback calls");
    }
    a.backend_notes = in.list("backend notes", [&] { return std::string(in.str("backend note")); });
    check(in.done(), "bytes after the header's end");
    check_consistent_header(a);

    // The graphs, decoded on first use. The decoders hold what they read: the records, the data,
    // and the facts they check the graphs against.
    auto header = std::make_shared<const GraphFacts>(a);
    auto on_malformed = std::make_shared<const std::function<void()>>(std::move(on_malformed_graph));
    auto decode_partition = [origin, header, data, on_malformed]() -> std::shared_ptr<const PartitionResult> {
      return decoding(origin, header->name, *on_malformed, [&]() -> std::shared_ptr<const PartitionResult> {
        const Json& records = data->graph_records();
        header->check_records(records);
        const Json& p = records.at("partition");
        auto r = std::make_shared<PartitionResult>();
        r->forward = graph_from_json(p.at("forward"), *data, "forward");
        r->backward = graph_from_json(p.at("backward"), *data, "backward");
        r->num_fwd_outputs = p.at("num_fwd_outputs").get<std::size_t>();
        r->saved_values = p.at("saved_values").get<std::vector<std::string>>();
        r->saved_bytes = p.at("saved_bytes").get<int64_t>();
        r->recomputed = p.at("recomputed").get<std::vector<std::string>>();
        r->partitioner = p.at("partitioner").get<std::string>();
        for (bool freed : p.at("backward_frees_input").get<std::vector<bool>>())
          r->backward_input_lifetimes.push_back(freed ? InputLifetime::FreedAfterLastUse : InputLifetime::HeldByCaller);
        r->forward_schedule = schedule_from_json(p.at("forward_schedule"));
        r->backward_schedule = schedule_from_json(p.at("backward_schedule"));
        header->check_partition(*r);
        return r;
      });
    };
    a.set_graph_decoders(
        [origin, header, data, on_malformed] {
          return decoding(origin, header->name, *on_malformed, [&] {
            const Json& records = data->graph_records();
            header->check_records(records);
            TracedProgram t;
            t.grad_inputs = header->grad_inputs;
            t.undefined_grads = header->undefined_grads;
            if (const Json& joint = records.at("joint"); !joint.is_null()) {
              t.joint = std::make_shared<const JointGraph>(JointGraph{
                  graph_from_json(joint.at("graph"), *data, "joint"), joint.at("num_primals").get<std::size_t>(),
                  joint.at("num_fwd_outputs").get<std::size_t>()});
            } else {
              auto g =
                  std::make_shared<const Graph>(graph_from_json(records.at("inference_graph"), *data, "inference"));
              header->check_inference_graph(*g);
              t.inference_graph = std::move(g);
            }
            return t;
          });
        },
        a.training ? std::function<std::shared_ptr<const PartitionResult>()>(std::move(decode_partition)) : nullptr);
    return a;
  } catch (const ArtifactFormatError&) {
    throw;
  } catch (const std::exception& e) {  // nlohmann's type/parse errors, c10::Error (devices), ...
    malformed(e.what());
  }
}

CompiledArtifact deserialize_artifact(std::string_view bytes) {
  auto owner = std::make_shared<const std::string>(bytes);
  return deserialize_artifact(owner, *owner);
}

}  // namespace aotpipe
