#include <aotpipe/export/exported_program.h>
#include <aotpipe/export/internal/graph_import.h>
#include <aotpipe/export/internal/pt2_archive.h>
#include <aotpipe/graph/device_retarget.h>
#include <aotpipe/graph/error_text.h>
#include <aotpipe/graph/formula_fusion.h>
#include <aotpipe/graph/interpreter.h>

#include <ATen/core/LegacyTypeDispatch.h>
#include <c10/core/impl/LocalDispatchKeySet.h>
#include <c10/util/Exception.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <iterator>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <type_traits>
#include <unordered_map>

namespace aotpipe {

using pt2::Json;
using pt2::SymbolValues;

namespace {

// One specialization of the program: its graph for one set of user input sizes, ready to run.
struct Specialization {
  std::shared_ptr<const Graph> graph;
  Interpreter interpreter;
  // What a compile traces: the graph with its pointwise formulas fused (graph/formula_fusion.h);
  // empty where that changed nothing (the graph's own serves). An interpreter keeps no reference
  // to its graph, so the fused copy is not kept.
  std::optional<Interpreter> fused_interpreter;

  const Interpreter& traced() const { return fused_interpreter ? *fused_interpreter : interpreter; }
};

using SizesKey = std::vector<std::vector<int64_t>>;

}  // namespace

// The implicit destructor destroys a nlohmann::json, whose destroy() gathers nested values on a
// std::vector (it may allocate, so the check cannot rule out bad_alloc).
// NOLINTNEXTLINE(bugprone-exception-escape)
struct ExportedProgram::Impl {
  std::string name;
  std::filesystem::path path;
  std::string dialect;
  std::string torch_version;
  Json graph_json;  // graph_module.graph
  ExportGraphSignature signature;
  std::vector<SymbolicDim> dims;
  std::vector<SymbolicDim> data_dependent_dims;  // u0, u1, ...: sizes read from tensor values
  std::string data_dependent_origin;             // the first node returning such a size
  std::vector<NamedTensor> parameters, buffers, constants;
  TensorList lifted;                     // one per lifted input, in input order
  std::vector<std::string> user_inputs;  // graph value names
  std::optional<TensorList> samples;
  std::optional<c10::Device> device;
  bool fuse_formulas = true;
  // Graph output k that is a mutation writes graph input mutation_targets[k]; the others are
  // the user outputs, in order.
  std::vector<std::pair<std::size_t, std::size_t>> mutations;  // (output index, input index)
  std::vector<std::size_t> user_outputs;
  // Per user output: the input it is, when the graph returns a mutated input's new value as a user
  // output too (`self.buf.add_(x); return self.buf` in the core ATen IR): the caller gets that
  // input itself, as eager and ep.module() return it (torch/export/_unlift.py,
  // _insert_copy_for_mutations), not a tensor of its own.
  std::vector<std::optional<std::size_t>> user_output_is_input;
  std::shared_ptr<const Specialization> hinted;  // at the export's sample sizes

  mutable std::mutex mutex;
  mutable std::map<SizesKey, std::shared_ptr<const Specialization>> specializations;

  std::string where() const { return path.string(); }
  // The name as an identifier of the text form ("resnet.aten" -> "resnet_aten").
  std::string graph_name() const {
    std::string id = name;
    for (char& c : id)
      if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_') c = '_';
    return id;
  }

  std::shared_ptr<const Specialization> build(const SymbolValues& symbols) const {
    // A build may happen inside the first call, and that call may be a trace: nothing it makes
    // (the graph's constants) may be recorded into that trace and outlive it in the cache.
    const c10::impl::ForceDispatchKeyGuard untraced(c10::default_included_set, c10::default_excluded_set);
    auto graph = std::make_shared<Graph>(pt2::import_graph(graph_json, graph_name(), symbols, where()));
    if (device) retarget_device(*graph, *device);
    auto spec = std::make_shared<Specialization>(Specialization{graph, Interpreter(*graph), std::nullopt});
    if (fuse_formulas) {
      Graph fused = *graph;
      if (!fuse_pointwise_formulas(fused).empty()) spec->fused_interpreter.emplace(fused);
    }
    return spec;
  }

  // The symbol values the sizes of `user` give, every dimension checked against the export.
  SymbolValues bind(const TensorList& user) const {
    if (user.size() != user_inputs.size())
      throw Pt2Error(fmt::format("{}: the program takes {} user inputs ({}), got {}", where(), user_inputs.size(),
                                 fmt::join(user_inputs, ", "), user.size()));
    SymbolValues symbols;
    std::map<std::string, std::string> bound_at;  // symbol -> "input i ('x') dimension d"
    const Json& values = graph_json.at("tensor_values");
    std::vector<std::tuple<std::string, int64_t, std::string>> derived;  // expression, actual size, place
    for (std::size_t i = 0; i < user.size(); ++i) {
      const std::string& name = user_inputs[i];
      if (!user[i].defined()) throw Pt2Error(fmt::format("{}: user input {} ('{}') is undefined", where(), i, name));
      const Json& sizes = values.at(name).at("sizes");
      if (static_cast<int64_t>(sizes.size()) != user[i].dim())
        throw Pt2Error(fmt::format("{}: user input {} ('{}') has {} dimensions; the export has {}", where(), i, name,
                                   user[i].dim(), sizes.size()));
      for (std::size_t d = 0; d < sizes.size(); ++d) {
        const int64_t actual = user[i].size(static_cast<int64_t>(d));
        const std::string place = fmt::format("user input {} ('{}') dimension {}", i, name, d);
        const Json& size = sizes[d];
        if (size.contains("as_int")) {
          if (size.at("as_int").get<int64_t>() != actual)
            throw Pt2Error(
                fmt::format("{}: {} is {}; the export fixed it at {} (export it with a dynamic dimension "
                            "to vary it)",
                            where(), place, actual, size.at("as_int").get<int64_t>()));
          continue;
        }
        const std::string expr = size.at("as_expr").at("expr_str").get<std::string>();
        if (auto symbol = pt2::as_bare_symbol(expr)) {
          auto [it, inserted] = symbols.emplace(*symbol, actual);
          if (!inserted && it->second != actual)
            throw Pt2Error(fmt::format("{}: {} is {}, but {} is {}; the export requires them equal (symbol {})",
                                       where(), place, actual, bound_at[*symbol], it->second, *symbol));
          bound_at.emplace(*symbol, place);
        } else {
          derived.emplace_back(expr, actual, place);
        }
      }
    }
    for (const SymbolicDim& dim : dims) {
      auto it = symbols.find(dim.symbol);
      if (it != symbols.end() && (it->second < dim.min || it->second > dim.max))
        throw Pt2Error(fmt::format("{}: {} is {}, outside the range [{}, {}] the export allows for it (symbol {})",
                                   where(), bound_at[dim.symbol], it->second, dim.min, dim.max, dim.symbol));
    }
    for (const auto& [expr, actual, place] : derived) {
      int64_t expected = 0;
      try {
        expected = pt2::evaluate_sym_expr(expr, symbols);
      } catch (const std::exception& e) { throw Pt2Error(fmt::format("{}: {}: {}", where(), place, error_text(e))); }
      if (expected != actual)
        throw Pt2Error(
            fmt::format("{}: {} is {}; the export requires {} = {} here", where(), place, actual, expr, expected));
    }
    return symbols;
  }

  std::shared_ptr<const Specialization> specialization(const TensorList& user) const {
    SizesKey key;
    for (const at::Tensor& t : user) key.emplace_back(t.defined() ? t.sizes().vec() : std::vector<int64_t>{});
    {
      std::lock_guard lock(mutex);
      if (auto it = specializations.find(key); it != specializations.end()) return it->second;
    }
    auto built = build(bind(user));  // outside the lock: a build may take a while
    std::lock_guard lock(mutex);
    return specializations.emplace(std::move(key), std::move(built)).first->second;
  }

  TensorList run(const Interpreter& interpreter, const TensorList& args) const {
    return run([&](const TensorList& a) { return interpreter.run(a); }, args);
  }
  TensorList run(const Function& graph, const TensorList& args) const {
    TensorList outputs = graph(args);
    for (const auto& [output, input] : mutations) {
      const at::Tensor& target = args[input];
      if (target.requires_grad()) {
        target.copy_(outputs[output]);
        continue;
      }
      // A buffer's new value written without bumping its version counter, as batch_norm writes
      // its running statistics in the training IR: the op that computed the new value (e.g.
      // _native_batch_norm_legit_functional) saved the old one for a backward that never reads
      // it, and a bump would make that backward fail (as PyTorch's own ep.module() does).
      at::AutoDispatchBelowADInplaceOrView below_autograd;
      target.copy_(outputs[output]);
    }
    TensorList result;
    result.reserve(user_outputs.size());
    for (std::size_t j = 0; j < user_outputs.size(); ++j) {
      if (user_output_is_input[j])
        result.push_back(args[*user_output_is_input[j]]);
      else
        result.push_back(std::move(outputs[user_outputs[j]]));
    }
    return result;
  }
};

// ---- loading --------------------------------------------------------------------------------

namespace {

using signature::InputKind;
using signature::InputSpec;
using signature::OutputKind;
using signature::OutputSpec;

std::string tensor_name(const Json& arg, std::string_view where, std::string_view what) {
  // Parameter/buffer/constant specs hold a bare TensorArgument, user inputs and outputs an Argument.
  if (arg.contains("name")) return arg.at("name").get<std::string>();
  if (arg.contains("as_tensor")) return arg.at("as_tensor").at("name").get<std::string>();
  throw Pt2Error(fmt::format("{}: {} is `{}`: only tensors are supported", where, what, arg.dump()));
}

// The spec kinds a program may have: JSON key, kind, the key of its target, how errors name it.
template <class Kind>
struct SpecKind {
  std::string_view key;
  Kind kind;
  std::string_view target_key;  // empty: no target
  std::string_view what;
};
constexpr SpecKind<InputKind> kInputKinds[] = {
    {"user_input", InputKind::UserInput, "", "a user input"},
    {"parameter", InputKind::Parameter, "parameter_name", "a parameter"},
    {"buffer", InputKind::Buffer, "buffer_name", "a buffer"},
    {"tensor_constant", InputKind::ConstantTensor, "tensor_constant_name", "a constant"},
};
constexpr SpecKind<OutputKind> kOutputKinds[] = {
    {"user_output", OutputKind::UserOutput, "", "a user output"},
    {"buffer_mutation", OutputKind::BufferMutation, "buffer_name", "a buffer mutation"},
    {"parameter_mutation", OutputKind::ParameterMutation, "parameter_name", "a parameter mutation"},
    {"user_input_mutation", OutputKind::UserInputMutation, "user_input_name", "a user input mutation"},
};

// Kinds the schema has and this importer refuses, with the reason.
std::string refused_spec(std::string_view kind, const Json& body, std::string_view where) {
  if (kind == "custom_obj")
    return fmt::format("{}: input '{}' is a custom object (TorchBind); custom objects are not supported", where,
                       body.value("custom_obj_name", "?"));
  if (kind == "token")
    return fmt::format(
        "{}: the program takes or returns an effect token (side-effectful custom ops); tokens are not "
        "supported",
        where);
  if (kind == "constant_input")
    return fmt::format("{}: input '{}' is a constant non-tensor input; only tensor inputs are supported", where,
                       body.value("name", "?"));
  if (kind == "loss_output" || kind == "gradient_to_parameter" || kind == "gradient_to_user_input")
    return fmt::format(
        "{}: output kind '{}' belongs to a joint forward-backward export; export the forward only "
        "(aotpipe traces the backward itself)",
        where, kind);
  return fmt::format("{}: unknown graph signature spec kind '{}'", where, kind);
}

template <class Spec, class Kind, std::size_t N>
std::vector<Spec> read_specs(const Json& specs, const SpecKind<Kind> (&kinds)[N], std::string_view where) {
  std::vector<Spec> out;
  for (const Json& spec : specs) {
    const std::string& key = pt2::union_key(spec);
    const Json& body = spec.at(key);
    const auto* kind = std::find_if(std::begin(kinds), std::end(kinds), [&](const auto& k) { return k.key == key; });
    if (kind == std::end(kinds)) throw Pt2Error(refused_spec(key, body, where));
    Spec read;
    read.kind = kind->kind;
    read.arg.name = tensor_name(body.at("arg"), where, kind->what);
    if (!kind->target_key.empty()) read.target = body.at(std::string(kind->target_key)).template get<std::string>();
    if constexpr (std::is_same_v<Spec, InputSpec>)
      if (read.kind == InputKind::Buffer) read.persistent = body.value("persistent", true);
    out.push_back(std::move(read));
  }
  return out;
}

ExportGraphSignature read_signature(const Json& json, std::string_view where) {
  ExportGraphSignature sig;
  sig.input_specs = read_specs<InputSpec>(json.at("input_specs"), kInputKinds, where);
  sig.output_specs = read_specs<OutputSpec>(json.at("output_specs"), kOutputKinds, where);
  return sig;
}

// The ranges of the export's symbols: those of input sizes into `dims`, the data-dependent ones
// (u0, u1, ...) into `data_dependent`.
void read_range_constraints(const Json& json, std::vector<SymbolicDim>& dims,
                            std::vector<SymbolicDim>& data_dependent) {
  if (!json.is_object()) return;
  auto bound = [](const Json& v, int64_t fallback) {
    return v.is_number_integer() ? v.get<int64_t>() : fallback;  // int_oo is written as a non-integer
  };
  for (auto it = json.begin(); it != json.end(); ++it) {
    SymbolicDim dim{it.key(), bound(it.value().value("min_val", Json()), 0),
                    bound(it.value().value("max_val", Json()), std::numeric_limits<int64_t>::max())};
    (pt2::is_unbacked_symbol(it.key()) ? data_dependent : dims).push_back(std::move(dim));
  }
  // The JSON object keeps its keys in string order (u10 before u2): number order, as the export's.
  std::sort(data_dependent.begin(), data_dependent.end(), [](const SymbolicDim& a, const SymbolicDim& b) {
    return std::stoll(a.symbol.substr(1)) < std::stoll(b.symbol.substr(1));
  });
}

// "node 'where' (torch.ops.aten.where.default)": the first node of `graph` (a graph_module.graph,
// or a region's subgraph, searched where the region stands) returning a tensor whose size is
// data-dependent; empty when none does.
std::string data_dependent_origin(const Json& graph) {
  const Json& metas = graph.at("tensor_values");
  auto data_dependent = [&](const Json& tensor) {
    const std::string name = tensor.at("name").get<std::string>();
    return metas.contains(name) && !pt2::unbacked_symbols_of_meta(metas.at(name)).empty();
  };
  for (const Json& node : graph.at("nodes")) {
    for (const Json& input : node.at("inputs"))
      if (input.contains("arg") && input.at("arg").is_object() && input.at("arg").contains("as_graph"))
        if (std::string inner = data_dependent_origin(input.at("arg").at("as_graph").at("graph")); !inner.empty())
          return inner;
    for (const Json& out : node.at("outputs")) {
      const std::string& kind = pt2::union_key(out);
      bool found = false;
      if (kind == "as_tensor") found = data_dependent(out.at(kind));
      if (kind == "as_optional_tensor" && pt2::union_key(out.at(kind)) == "as_tensor")
        found = data_dependent(out.at(kind).at("as_tensor"));
      if (kind == "as_tensors")
        for (const Json& t : out.at(kind)) found = found || data_dependent(t);
      if (found)
        return fmt::format("node '{}' ({})", node.value("name", std::string("?")),
                           node.value("target", std::string("?")));
    }
  }
  return "";
}

// The export's sample sizes: each bare symbol of a user input's size, at its hint.
SymbolValues hint_symbols(const Json& graph, const std::vector<std::string>& user_inputs) {
  SymbolValues symbols;
  for (const std::string& name : user_inputs)
    for (const Json& size : graph.at("tensor_values").at(name).at("sizes"))
      if (size.contains("as_expr")) {
        const Json& expr = size.at("as_expr");
        auto symbol = pt2::as_bare_symbol(expr.at("expr_str").get<std::string>());
        if (symbol && expr.contains("hint") && expr.at("hint").is_object() && expr.at("hint").contains("as_int"))
          symbols.emplace(*symbol, expr.at("hint").at("as_int").get<int64_t>());
      }
  return symbols;
}

at::Tensor to_device(at::Tensor t, const std::optional<c10::Device>& device) {
  if (!device || t.device() == *device || !device_available(*device)) return t;
  return t.to(*device).detach();
}

std::string_view describe(InputKind kind) {
  switch (kind) {
    case InputKind::Parameter: return "parameter";
    case InputKind::Buffer: return "buffer";
    case InputKind::ConstantTensor: return "constant";
    default: return "input";
  }
}

}  // namespace

std::shared_ptr<ExportedProgram::Impl> ExportedProgram::load(const std::filesystem::path& path,
                                                             const LoadExportedProgramOptions& options) {
  auto impl = std::make_shared<ExportedProgram::Impl>();
  impl->path = path;
  impl->name = path.stem().string();
  impl->device = options.device;
  impl->fuse_formulas = options.fuse_formulas;
  const std::string where = path.string();
  pt2::Pt2Archive archive(path, options.map_weights);
  const Json model = archive.model_json();
  try {
    const Json& module = model.at("graph_module");
    impl->graph_json = module.at("graph");
    impl->torch_version = model.value("torch_version", "");
    if (model.contains("verifiers") && model.at("verifiers").is_array() && !model.at("verifiers").empty())
      impl->dialect = model.at("verifiers")[0].get<std::string>();
    else
      impl->dialect = model.value("dialect", "");
    impl->signature = read_signature(module.at("signature"), where);
    read_range_constraints(model.value("range_constraints", Json::object()), impl->dims, impl->data_dependent_dims);
    if (!impl->data_dependent_dims.empty()) {
      impl->data_dependent_origin = data_dependent_origin(impl->graph_json);
      if (impl->data_dependent_origin.empty()) impl->data_dependent_origin = "a node the graph does not name";
    }
  } catch (const Json::exception& e) {
    throw Pt2Error(fmt::format("{}: models/{}.json does not have the torch.export schema: {}", where,
                               archive.model_name(), e.what()));
  }

  // Graph inputs and the signature's input specs are one list, in one order.
  const Json& inputs = impl->graph_json.at("inputs");
  const auto& specs = impl->signature.input_specs;
  if (inputs.size() != specs.size())
    throw Pt2Error(fmt::format("{}: the graph takes {} inputs but the signature describes {}", where, inputs.size(),
                               specs.size()));
  std::unordered_map<const c10::TensorImpl*, at::Tensor> on_device;  // stored tensor -> itself on the device
  for (std::size_t i = 0; i < specs.size(); ++i) {
    const InputSpec& spec = specs[i];
    if (spec.kind == InputKind::UserInput) {
      impl->user_inputs.push_back(spec.arg.name);
      continue;
    }
    if (!impl->user_inputs.empty())
      throw Pt2Error(
          fmt::format("{}: input {} ('{}') is lifted state after a user input; torch.export puts "
                      "parameters, buffers and constants first",
                      where, i, spec.arg.name));
    // A tensor under two names (tied weights) is one tensor on the device too.
    at::Tensor stored = archive.state_tensor(*spec.target, describe(spec.kind));
    auto [moved, fresh] = on_device.try_emplace(stored.unsafeGetTensorImpl());
    if (fresh) moved->second = to_device(stored, options.device);
    at::Tensor t = moved->second;
    if (spec.kind == InputKind::Parameter) {
      const bool requires_grad = impl->graph_json.at("tensor_values").at(spec.arg.name).value("requires_grad", true);
      t.requires_grad_(requires_grad);
      impl->parameters.push_back({*spec.target, t});
    } else if (spec.kind == InputKind::Buffer) {
      impl->buffers.push_back({*spec.target, t});
    } else {
      impl->constants.push_back({*spec.target, t});
    }
    impl->lifted.push_back(t);
  }

  // Graph outputs and output specs likewise; mutations name the input they write.
  const auto& outs = impl->signature.output_specs;
  if (impl->graph_json.at("outputs").size() != outs.size())
    throw Pt2Error(fmt::format("{}: the graph returns {} values but the signature describes {}", where,
                               impl->graph_json.at("outputs").size(), outs.size()));
  for (std::size_t k = 0; k < outs.size(); ++k) {
    if (outs[k].kind == OutputKind::UserOutput) {
      impl->user_outputs.push_back(k);
      continue;
    }
    std::optional<std::size_t> input;
    for (std::size_t i = 0; i < specs.size() && !input; ++i) {
      const bool by_fqn = outs[k].kind != OutputKind::UserInputMutation && specs[i].target == outs[k].target &&
                          (specs[i].kind == InputKind::Buffer || specs[i].kind == InputKind::Parameter);
      const bool by_name = outs[k].kind == OutputKind::UserInputMutation && specs[i].kind == InputKind::UserInput &&
                           specs[i].arg.name == *outs[k].target;
      if (by_fqn || by_name) input = i;
    }
    if (!input)
      throw Pt2Error(fmt::format("{}: output {} ({}) writes '{}', which no input of the program is", where, k,
                                 to_string(outs[k].kind), *outs[k].target));
    impl->mutations.emplace_back(k, *input);
  }
  auto output_name = [&](std::size_t k) -> std::optional<std::string> {
    const Json& out = impl->graph_json.at("outputs").at(k);
    if (!out.contains("as_tensor")) return std::nullopt;
    return out.at("as_tensor").at("name").get<std::string>();
  };
  for (std::size_t k : impl->user_outputs) {
    std::optional<std::size_t> is_input;
    const std::optional<std::string> name = output_name(k);
    for (const auto& [output, input] : impl->mutations)
      if (name && !is_input && output_name(output) == name) is_input = input;
    impl->user_output_is_input.push_back(is_input);
  }

  std::string note;
  impl->samples = archive.sample_inputs(note);
  if (impl->samples && impl->samples->size() != impl->user_inputs.size()) impl->samples.reset();
  if (impl->samples)
    for (at::Tensor& t : *impl->samples) t = to_device(t, options.device);

  // Importing the graph at the sample sizes checks every node once, at load.
  impl->hinted = impl->build(hint_symbols(impl->graph_json, impl->user_inputs));
  SizesKey hinted_sizes;  // what specialization() looks it up by: the user inputs' sizes
  const Graph& hinted_graph = *impl->hinted->graph;
  for (std::size_t i = hinted_graph.num_inputs() - impl->user_inputs.size(); i < hinted_graph.num_inputs(); ++i) {
    const TensorMeta* meta = hinted_graph.input(i)->meta();
    hinted_sizes.emplace_back(meta ? std::vector<int64_t>(meta->sizes.begin(), meta->sizes.end())
                                   : std::vector<int64_t>{});
  }
  impl->specializations.emplace(std::move(hinted_sizes), impl->hinted);
  return impl;
}

namespace {

// Runs a reader of the archive at `path`, turning what escapes it as another type into the
// Pt2Error naming the file: nlohmann's errors (a field of the wrong type, or missing where the
// schema requires it) and c10's (torch's zip reader on a record it cannot read: a bad CRC, a
// file outside the archive's folder, a truncated entry), and the serde readers' SerdeError (a
// value the schema allows that cannot be read: a symbolic expression outside sympy's srepr).
template <class Read>
auto reading_archive(const std::filesystem::path& path, Read&& read) {
  try {
    return read();
  } catch (const Json::exception& e) {
    throw Pt2Error(fmt::format("{}: the model does not have the torch.export schema: {}", path.string(), e.what()));
  } catch (const pt2::SerdeError& e) {
    throw Pt2Error(fmt::format("{}: {}", path.string(), e.what()));
  } catch (const c10::Error& e) {
    const std::string what = error_text(e);
    throw Pt2Error(fmt::format("{}: not a readable .pt2 archive: {}", path.string(), what.substr(0, what.find('\n'))));
  }
}

}  // namespace

ExportedProgram load_exported_program(const std::filesystem::path& path, LoadExportedProgramOptions options) {
  ExportedProgram ep;
  ep.impl_ = reading_archive(path, [&] { return ExportedProgram::load(path, options); });
  return ep;
}

// ---- accessors and calls --------------------------------------------------------------------

const std::string& ExportedProgram::name() const { return impl_->name; }
const std::filesystem::path& ExportedProgram::path() const { return impl_->path; }
const std::string& ExportedProgram::dialect() const { return impl_->dialect; }
const std::string& ExportedProgram::torch_version() const { return impl_->torch_version; }
const Graph& ExportedProgram::graph() const { return *impl_->hinted->graph; }
const ExportGraphSignature& ExportedProgram::signature() const { return impl_->signature; }
const std::vector<SymbolicDim>& ExportedProgram::symbolic_dims() const { return impl_->dims; }
const std::vector<SymbolicDim>& ExportedProgram::data_dependent_dims() const { return impl_->data_dependent_dims; }
const std::vector<NamedTensor>& ExportedProgram::parameters() const { return impl_->parameters; }
const std::vector<NamedTensor>& ExportedProgram::buffers() const { return impl_->buffers; }
const std::vector<NamedTensor>& ExportedProgram::constants() const { return impl_->constants; }
TensorList ExportedProgram::lifted_tensors() const { return impl_->lifted; }
std::size_t ExportedProgram::num_user_inputs() const { return impl_->user_inputs.size(); }
const std::optional<TensorList>& ExportedProgram::sample_inputs() const { return impl_->samples; }

std::shared_ptr<const Graph> ExportedProgram::graph_for(const TensorList& user_inputs) const {
  return impl_->specialization(user_inputs)->graph;
}

TensorList ExportedProgram::operator()(const TensorList& user_inputs) const {
  auto spec = impl_->specialization(user_inputs);
  TensorList args = impl_->lifted;
  args.insert(args.end(), user_inputs.begin(), user_inputs.end());
  return impl_->run(spec->interpreter, args);
}

TensorList ExportedProgram::run_graph_with(const TensorList& user_inputs, const GraphRun& run) const {
  auto spec = impl_->specialization(user_inputs);  // checks the sizes against the export
  TensorList args = impl_->lifted;
  args.insert(args.end(), user_inputs.begin(), user_inputs.end());
  return impl_->run([&](const TensorList& a) { return run(*spec->graph, a); }, args);
}

Function ExportedProgram::flat_function() const {
  if (!impl_->data_dependent_dims.empty()) {
    std::vector<std::string> symbols;
    for (const SymbolicDim& dim : impl_->data_dependent_dims) symbols.push_back(dim.symbol);
    throw Pt2Error(fmt::format(
        "{}: the program has data-dependent sizes ({}; the first from {}): a compile specializes every size "
        "to its value, which for these is known only once the program runs, so it cannot be compiled as one "
        "graph; compile_exported_program compiles its regions of known sizes, and it runs as exported "
        "(ExportedProgram::operator())",
        impl_->where(), fmt::join(symbols, ", "), impl_->data_dependent_origin));
  }
  return [impl = impl_](const TensorList& args) {
    const std::size_t lifted = impl->lifted.size();
    if (args.size() < lifted)
      throw Pt2Error(fmt::format("{}: the flat program takes {} lifted tensors then the user inputs; got {} arguments",
                                 impl->where(), lifted, args.size()));
    auto spec = impl->specialization(TensorList(args.begin() + static_cast<std::ptrdiff_t>(lifted), args.end()));
    return impl->run(spec->traced(), args);
  };
}

std::string archive_compile_ingredients(const std::filesystem::path& path) {
  return reading_archive(path, [&] { return pt2::Pt2Archive(path, /*map_weights=*/false).compile_ingredients(); });
}

}  // namespace aotpipe
