#include <aotpipe/export/exported_program.h>
#include <aotpipe/export/internal/graph_import.h>
#include <aotpipe/graph/autocast_region.h>
#include <aotpipe/graph/grad_mode_region.h>
#include <aotpipe/graph/error_text.h>

#include <ATen/ScalarOps.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/core/Device.h>
#include <c10/core/Scalar.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <functional>
#include <map>
#include <optional>
#include <stdexcept>
#include <type_traits>
#include <unordered_map>

namespace aotpipe::pt2 {
namespace {

constexpr std::string_view kOpsPrefix = "torch.ops.";

// Symbolic-integer arithmetic the export writes as Python operators (on SymInts).
const std::map<std::string, std::function<int64_t(int64_t, int64_t)>, std::less<>>& sym_int_binary_ops() {
  static const std::map<std::string, std::function<int64_t(int64_t, int64_t)>, std::less<>> ops = {
      {"_operator.add", [](int64_t a, int64_t b) { return a + b; }},
      {"_operator.sub", [](int64_t a, int64_t b) { return a - b; }},
      {"_operator.mul", [](int64_t a, int64_t b) { return a * b; }},
      {"_operator.floordiv",
       [](int64_t a, int64_t b) {
         if (b == 0) throw SerdeError("integer division by zero");
         int64_t q = a / b;
         return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
       }},
      {"_operator.mod",
       [](int64_t a, int64_t b) {
         if (b == 0) throw SerdeError("integer modulo by zero");
         int64_t r = a % b;
         return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
       }},
      {"torch.sym_max", [](int64_t a, int64_t b) { return std::max(a, b); }},
      {"torch.sym_min", [](int64_t a, int64_t b) { return std::min(a, b); }},
  };
  return ops;
}

const std::map<std::string, std::function<bool(int64_t, int64_t)>, std::less<>>& sym_compare_ops() {
  static const std::map<std::string, std::function<bool(int64_t, int64_t)>, std::less<>> ops = {
      {"_operator.eq", std::equal_to<>()}, {"_operator.ne", std::not_equal_to<>()},
      {"_operator.lt", std::less<>()},     {"_operator.le", std::less_equal<>()},
      {"_operator.gt", std::greater<>()},  {"_operator.ge", std::greater_equal<>()},
  };
  return ops;
}

c10::TypePtr without_optional(const c10::TypePtr& type) {
  if (auto opt = type->castRaw<c10::OptionalType>()) return opt->getElementType();
  return type;
}

bool is_tensor_type(const c10::TypePtr& type) { return without_optional(type)->kind() == c10::TypeKind::TensorType; }

// A symbolic value known only at run time: it depends on data-dependent symbols (`symbols`,
// "u4"), sizes the program reads from tensor values.
class DataDependentValue : public std::runtime_error {
 public:
  explicit DataDependentValue(std::string symbols)
      : std::runtime_error("depends on data-dependent sizes " + symbols), symbols(std::move(symbols)) {}
  std::string symbols;
};

class GraphImporter {
 public:
  GraphImporter(const Json& graph_json, std::string graph_name, const SymbolValues& symbols, std::string_view where)
      : json_(graph_json), graph_(std::move(graph_name)), symbols_(symbols), where_(where) {}

  Graph run() {
    scopes_.emplace_back(json_);
    add_inputs();
    for (const Json& node : json_.at("nodes")) add_node(node);
    try {
      set_outputs();
    } catch (const Pt2Error&) { throw; } catch (const std::exception& e) {
      fail(fmt::format("outputs: {}", error_text(e)));
    }
    return std::move(graph_);
  }

 private:
  [[noreturn]] void fail(const std::string& message) const { throw Pt2Error(fmt::format("{}: {}", where_, message)); }
  std::string node_label() const { return fmt::format("node '{}' ({})", node_name_, target_); }
  [[noreturn]] void fail_node(const std::string& message) const { fail(fmt::format("{}: {}", node_label(), message)); }

  const Json& meta_json(const std::string& name) const {
    const auto& metas = scopes_.back().metas;
    auto it = metas.find(name);
    if (it == metas.end()) fail(fmt::format("tensor '{}' has no entry in the graph's tensor_values", name));
    return *it->second;
  }

  TensorMeta meta_of(const std::string& name) {
    try {
      return tensor_meta_from_serde(meta_json(name), symbols_);
    } catch (const std::exception& e) { fail(fmt::format("tensor '{}': {}", name, error_text(e))); }
  }

  // A result's metadata; none where its sizes are data-dependent (known when the call has run).
  std::optional<TensorMeta> result_meta_of(const std::string& name) {
    if (!unbacked_symbols_of_meta(meta_json(name)).empty()) return std::nullopt;
    return meta_of(name);
  }

  Value* value(const std::string& name) {
    const auto& values = scopes_.back().values;
    auto it = values.find(name);
    if (it == values.end()) fail_node(fmt::format("reads '{}', which no input or earlier node defines", name));
    return it->second;
  }

  void add_inputs() {
    std::size_t index = 0;
    for (const Json& input : json_.at("inputs")) {
      const std::string& kind = union_key(input);
      if (kind == "as_tensor") {
        const std::string name = input.at("as_tensor").at("name").get<std::string>();
        Value*& slot = scopes_.back().values[name];
        if (slot != nullptr) fail(fmt::format("graph input {} is named '{}', as an earlier input is", index, name));
        TensorMeta meta = meta_of(name);
        try {
          slot = graph_.add_input(name, std::move(meta));
        } catch (const GraphError& e) { fail(fmt::format("graph input {}: {}", index, e.what())); }
      } else if (kind == "as_token") {
        fail(fmt::format("graph input {} is an effect token: programs with side-effectful custom ops are not supported",
                         index));
      } else if (kind == "as_custom_obj") {
        fail(fmt::format("graph input {} is a custom object ({}): TorchBind objects are not supported", index,
                         input.at("as_custom_obj").value("class_fqn", "?")));
      } else {
        fail(
            fmt::format("graph input {} is a {} (`{}`): only tensor inputs are supported (a number input is "
                        "specialized by torch.export unless marked dynamic)",
                        index, kind.substr(3), input.dump()));
      }
      ++index;
    }
  }

  void set_outputs() {
    std::vector<Value*> outputs;
    std::size_t index = 0;
    for (const Json& output : json_.at("outputs")) {
      const std::string& kind = union_key(output);
      if (kind == "as_tensor") {
        outputs.push_back(value(output.at("as_tensor").at("name").get<std::string>()));
      } else if (kind == "as_token") {
        fail(fmt::format(
            "graph output {} is an effect token: programs with side-effectful custom ops are not supported", index));
      } else {
        fail(fmt::format("graph output {} is a {} (`{}`): only tensor outputs are supported", index, kind.substr(3),
                         output.dump()));
      }
      ++index;
    }
    graph_.set_outputs(std::move(outputs));
  }

  // ---- symbolic values --------------------------------------------------------------------

  // A symbolic value: a literal ({"as_int": 3} / {"as_bool": true}) or a name an earlier node defined.
  template <class T>
  T sym_value(const Json& arg, const char* literal_key, const std::unordered_map<std::string, T>& values,
              const char* type_name) {
    const std::string& kind = union_key(arg);
    if (kind == literal_key) return arg.at(kind).get<T>();
    if (kind != "as_name") fail_node(fmt::format("unknown {} argument kind '{}'", type_name, kind));
    const std::string name = arg.at("as_name").get<std::string>();
    if (auto dd = data_dependent_.find(name); dd != data_dependent_.end()) throw DataDependentValue(dd->second);
    auto it = values.find(name);
    if (it == values.end()) fail_node(fmt::format("reads {} '{}', which no earlier node defines", type_name, name));
    return it->second;
  }
  int64_t sym_int(const Json& arg) { return sym_value(arg, "as_int", sym_ints_, "SymInt"); }
  bool sym_bool(const Json& arg) { return sym_value(arg, "as_bool", sym_bools_, "SymBool"); }
  // An integer operand of a symbolic node: {"as_sym_int": ...} or {"as_int": n}.
  int64_t int_operand(const Json& arg) {
    const std::string& kind = union_key(arg);
    if (kind == "as_int") return arg.at("as_int").get<int64_t>();
    if (kind == "as_sym_int") return sym_int(arg.at("as_sym_int"));
    fail_node(fmt::format("expected an integer operand, got {}", kind));
  }
  // Defines symbolic value `name` (a later definition of a name replaces an earlier one: a
  // region's subgraph reuses outer names).
  void define_int(const std::string& name, int64_t v) {
    data_dependent_.erase(name);
    sym_ints_[name] = v;
  }
  void define_bool(const std::string& name, bool v) {
    data_dependent_.erase(name);
    sym_bools_[name] = v;
  }
  void define_data_dependent(const std::string& name, std::string symbols) {
    sym_ints_.erase(name);
    sym_bools_.erase(name);
    data_dependent_[name] = std::move(symbols);
  }
  // The name a symbolic node's single output defines.
  std::string sym_output_name(const Json& node, const char* kind) {
    const Json& outputs = node.at("outputs");
    if (outputs.size() != 1 || union_key(outputs[0]) != kind) fail_node(fmt::format("expected one {} output", kind));
    return outputs[0].at(kind).at("as_name").get<std::string>();
  }

  // True when `node` is symbolic arithmetic or a check, evaluated here rather than recorded.
  bool evaluate_symbolic(const Json& node) {
    const Json& inputs = node.at("inputs");
    auto arg = [&](std::size_t i) -> const Json& {
      if (i >= inputs.size()) fail_node(fmt::format("expected at least {} arguments", i + 1));
      return inputs[i].at("arg");
    };
    const bool is_size = target_ == "torch.ops.aten.sym_size.int",
               is_stride = target_ == "torch.ops.aten.sym_stride.int";
    if (is_size || is_stride) {
      const std::string tensor = arg(0).at("as_tensor").at("name").get<std::string>();
      const TensorMeta* meta = value(tensor)->meta();
      const Json& serialized = meta_json(tensor).at(is_size ? "sizes" : "strides");
      int64_t dim = int_operand(arg(1));
      if (dim < 0) dim += static_cast<int64_t>(serialized.size());
      if (dim < 0 || dim >= static_cast<int64_t>(serialized.size()))
        fail_node(fmt::format("dimension {} out of range", dim));
      const std::string output = sym_output_name(node, "as_sym_int");
      const Json& size = serialized[static_cast<std::size_t>(dim)];
      if (const auto unbacked = unbacked_symbols_of(size); !unbacked.empty()) {
        define_data_dependent(output, fmt::format("{}", fmt::join(unbacked, ", ")));
      } else if (meta) {
        define_int(output, (is_size ? meta->sizes : meta->strides)[static_cast<std::size_t>(dim)]);
      } else {  // a known dimension of a tensor whose other sizes are data-dependent
        define_int(output, sym_int_value(size, symbols_));
      }
      return true;
    }
    if (target_ == "torch.ops.aten.sym_numel.default" || target_ == "torch.ops.aten.sym_storage_offset.default") {
      const std::string tensor = arg(0).at("as_tensor").at("name").get<std::string>();
      const TensorMeta* meta = value(tensor)->meta();
      const std::string output = sym_output_name(node, "as_sym_int");
      if (const auto unbacked = unbacked_symbols_of_meta(meta_json(tensor)); !unbacked.empty()) {
        define_data_dependent(output, fmt::format("{}", fmt::join(unbacked, ", ")));
        return true;
      }
      if (!meta) fail_node("its tensor has no metadata");
      define_int(output, target_ == "torch.ops.aten.sym_numel.default" ? meta->numel() : meta->storage_offset);
      return true;
    }
    // Arithmetic and comparisons of data-dependent values are data-dependent themselves.
    auto define = [&](const char* kind, auto&& compute) {
      const std::string output = sym_output_name(node, kind);
      try {
        if constexpr (std::is_same_v<decltype(compute()), bool>)
          define_bool(output, compute());
        else
          define_int(output, compute());
      } catch (const DataDependentValue& e) { define_data_dependent(output, e.symbols); }
      return true;
    };
    if (auto it = sym_int_binary_ops().find(target_); it != sym_int_binary_ops().end())
      return define("as_sym_int", [&] { return it->second(int_operand(arg(0)), int_operand(arg(1))); });
    if (target_ == "_operator.neg") return define("as_sym_int", [&] { return -int_operand(arg(0)); });
    if (auto it = sym_compare_ops().find(target_); it != sym_compare_ops().end())
      return define("as_sym_bool", [&] { return it->second(int_operand(arg(0)), int_operand(arg(1))); });
    if (target_ == "torch.ops.aten._assert_scalar.default") {
      const Json& cond = arg(0);
      bool ok = true;
      try {
        ok = union_key(cond) == "as_sym_bool" ? sym_bool(cond.at("as_sym_bool")) : cond.at("as_bool").get<bool>();
      } catch (const DataDependentValue&) {
        // A check of a data-dependent size (the export's `u4 <= 32`, a torch._check): its value
        // is known only at run time, which the graph does not evaluate (docs/export.md).
        return true;
      }
      if (!ok) {
        std::string message = inputs.size() > 1 ? arg(1).value("as_string", "") : "";
        fail_node(fmt::format("the export's runtime assertion fails for these sizes: {}", message));
      }
      return true;
    }
    // Checks of unbacked sizes, and of metadata the tracer checks itself (see the header).
    return target_ == "torch.ops.aten.sym_constrain_range_for_size.default" ||
           target_ == "torch.ops.aten.sym_constrain_range.default" ||
           target_ == "torch.ops.aten._assert_tensor_metadata.default";
  }

  // ---- call nodes --------------------------------------------------------------------------

  c10::OperatorHandle resolve(std::string_view target) {
    // torch.ops.<namespace>.<op>.<overload>
    std::string_view rest = target.substr(kOpsPrefix.size());
    const std::size_t dot1 = rest.find('.');
    const std::size_t dot2 = rest.rfind('.');
    const std::string ns(rest.substr(0, dot1));
    if (ns == "higher_order")
      fail_node(
          fmt::format("higher-order operator {} is not supported (control flow, wrapped subgraphs; only "
                      "grad-mode and autocast regions are); export without it or inline it",
                      rest.substr(dot1 + 1)));
    if (dot1 == std::string_view::npos || dot1 == dot2)
      fail_node("target is not torch.ops.<namespace>.<op>.<overload>");
    const std::string op_name = ns + "::" + std::string(rest.substr(dot1 + 1, dot2 - dot1 - 1));
    std::string overload(rest.substr(dot2 + 1));
    if (overload == "default") overload.clear();
    auto handle = c10::Dispatcher::singleton().findSchema({op_name, overload});
    if (!handle)
      fail_node(fmt::format("operator {}{} is not registered in this process{}", op_name,
                            overload.empty() ? "" : "." + overload,
                            ns == "aten" ? " (this libtorch does not have it)"
                                         : " (a custom op: load the library that registers it before loading)"));
    return *handle;
  }

  // A Python number passed for a Tensor parameter: a wrapped-number tensor, as PyTorch's
  // argument parser makes it (so type promotion treats it as a scalar).
  Argument wrapped_number(const c10::Scalar& s, const std::string& param) {
    at::Tensor t = at::scalar_to_tensor(s);
    t.unsafeGetTensorImpl()->set_wrapped_number(true);
    return graph_.add_constant(fmt::format("{}.{}", node_name_, param), t, graph_.fresh_name("_scalar"));
  }

  Argument convert(const Json& arg, const c10::Argument& formal) {
    const std::string& kind = union_key(arg);
    const Json& v = arg.at(kind);
    const c10::TypePtr type = without_optional(formal.type());
    const bool tensor_param = is_tensor_type(formal.type());
    const bool float_param = type->kind() == c10::TypeKind::FloatType;
    auto list_of_values = [&](const Json& items, bool optional_entries) {
      ValueList list;
      for (const Json& item : items) {
        if (!optional_entries) {
          list.values.push_back(value(item.at("name").get<std::string>()));
        } else if (union_key(item) == "as_none") {
          list.values.push_back(nullptr);
        } else {
          list.values.push_back(value(item.at("as_tensor").at("name").get<std::string>()));
        }
      }
      return Argument(std::move(list));
    };
    if (kind == "as_none") return Argument::none();
    if (kind == "as_tensor") return value(v.at("name").get<std::string>());
    if (kind == "as_optional_tensor")
      return union_key(v) == "as_none" ? Argument::none()
                                       : Argument(value(v.at("as_tensor").at("name").get<std::string>()));
    if (kind == "as_tensors") return list_of_values(v, false);
    if (kind == "as_optional_tensors") return list_of_values(v, true);
    if (kind == "as_int") {
      const int64_t i = v.get<int64_t>();
      if (tensor_param) return wrapped_number(c10::Scalar(i), formal.name());
      if (float_param) return c10::IValue(static_cast<double>(i));
      return c10::IValue(i);
    }
    if (kind == "as_float") {
      const double d = v.is_string() ? (v == "Infinity"    ? std::numeric_limits<double>::infinity()
                                        : v == "-Infinity" ? -std::numeric_limits<double>::infinity()
                                                           : std::numeric_limits<double>::quiet_NaN())
                                     : v.get<double>();
      if (tensor_param) return wrapped_number(c10::Scalar(d), formal.name());
      return c10::IValue(d);
    }
    if (kind == "as_bool") {
      if (tensor_param) return wrapped_number(c10::Scalar(v.get<bool>()), formal.name());
      return c10::IValue(v.get<bool>());
    }
    if (kind == "as_string") return c10::IValue(v.get<std::string>());
    if (kind == "as_ints") return c10::IValue(v.get<std::vector<int64_t>>());
    if (kind == "as_floats") {
      std::vector<double> out;
      for (const Json& f : v) out.push_back(f.is_string() ? std::nan("") : f.get<double>());
      return c10::IValue(out);
    }
    if (kind == "as_bools") {
      c10::List<bool> out;
      for (const Json& b : v) out.push_back(b.get<bool>());
      return c10::IValue(out);
    }
    if (kind == "as_strings") return c10::IValue(v.get<std::vector<std::string>>());
    if (kind == "as_sym_int") {
      const int64_t i = sym_int(v);
      return float_param ? c10::IValue(static_cast<double>(i)) : c10::IValue(i);
    }
    if (kind == "as_sym_ints") {
      std::vector<int64_t> out;
      for (const Json& s : v) out.push_back(sym_int(s));
      return c10::IValue(out);
    }
    if (kind == "as_sym_bool") return c10::IValue(sym_bool(v));
    if (kind == "as_sym_bools") {
      c10::List<bool> out;
      for (const Json& b : v) out.push_back(sym_bool(b));
      return c10::IValue(out);
    }
    if (kind == "as_scalar_type") return c10::IValue(static_cast<int64_t>(dtype_from_serde(v.get<int64_t>())));
    if (kind == "as_layout") return c10::IValue(static_cast<int64_t>(layout_from_serde(v.get<int64_t>())));
    if (kind == "as_memory_format")
      return c10::IValue(static_cast<int64_t>(memory_format_from_serde(v.get<int64_t>())));
    if (kind == "as_device") return c10::IValue(device_from_serde(v));
    if (kind == "as_custom_obj")
      fail_node(fmt::format("argument '{}' is a custom object: TorchBind objects are not supported", formal.name()));
    if (kind == "as_graph")
      fail_node(fmt::format("argument '{}' is a subgraph: higher-order ops are not supported", formal.name()));
    fail_node(fmt::format("argument '{}' has kind '{}', which this importer does not support", formal.name(), kind));
  }

  void add_call(const Json& node) {
    const c10::OperatorHandle op = resolve(target_);
    const c10::FunctionSchema& schema = op.schema();
    std::unordered_map<std::string, const Json*> given;
    for (const Json& named : node.at("inputs")) {
      const std::string name = named.at("name").get<std::string>();
      if (!given.emplace(name, &named.at("arg")).second) fail_node(fmt::format("argument '{}' given twice", name));
    }
    std::vector<Argument> args;
    for (const c10::Argument& formal : schema.arguments()) {
      auto it = given.find(formal.name());
      if (it != given.end()) {
        try {
          args.push_back(convert(*it->second, formal));
        } catch (const SerdeError& e) {
          fail_node(fmt::format("argument '{}': {}", formal.name(), e.what()));
        } catch (const DataDependentValue& e) {
          fail_node(fmt::format(
              "argument '{}' is a size read from tensor values ({}): data-dependent sizes as operator arguments "
              "are not supported",
              formal.name(), e.symbols));
        }
        given.erase(it);
      } else if (formal.default_value()) {
        // Arguments left at their default are not serialized.
        args.emplace_back(*formal.default_value());
      } else {
        fail_node(fmt::format("argument '{}' is missing and has no default in the schema {}", formal.name(),
                              c10::toString(schema)));
      }
    }
    if (!given.empty())
      fail_node(fmt::format("argument '{}' is not in the schema {}", given.begin()->first, c10::toString(schema)));

    std::vector<OutputSpec> outputs;
    std::vector<std::string> export_names;  // what the export calls each result ("" for none)
    auto tensor_output = [&](const std::string& name) {
      OutputSpec spec;
      spec.name = graph_.fresh_name(name);  // the export's name unless a subgraph used it already
      spec.meta = result_meta_of(name);
      export_names.push_back(name);
      return spec;
    };
    for (const Json& out : node.at("outputs")) {
      const std::string& kind = union_key(out);
      if (kind == "as_tensor") {
        outputs.push_back(tensor_output(out.at("as_tensor").at("name").get<std::string>()));
      } else if (kind == "as_tensors") {
        for (const Json& t : out.at("as_tensors")) outputs.push_back(tensor_output(t.at("name").get<std::string>()));
      } else if (kind == "as_none" || (kind == "as_optional_tensor" && union_key(out.at(kind)) == "as_none")) {
        outputs.emplace_back();  // an optional result that is None: a fresh, unused name
        export_names.emplace_back();
      } else if (kind == "as_optional_tensor") {
        outputs.push_back(tensor_output(out.at(kind).at("as_tensor").at("name").get<std::string>()));
      } else if (kind == "as_sym_int" || kind == "as_sym_float" || kind == "as_sym_bool") {
        fail_node(fmt::format(
            "returns a number read from tensor values ({}, as .item() or .tolist() make them): data-dependent "
            "numbers are not supported (sizes read from tensor values are, where no operator takes them as "
            "an argument)",
            kind));
      } else {
        fail_node(fmt::format("output kind '{}' is not supported (only tensor results are)", kind));
      }
    }
    Node* call = nullptr;
    try {
      call = graph_.add_call(op, std::move(args), std::move(outputs));
    } catch (const std::exception& e) { fail_node(error_text(e)); }
    if (!autocast_.empty()) call->attrs()[kAutocastAttr] = autocast_.back();
    if (!grad_mode_.empty()) call->attrs()[kGradEnabledAttr] = grad_mode_.back();
    for (std::size_t i = 0; i < export_names.size() && i < call->num_outputs(); ++i)
      if (!export_names[i].empty()) scopes_.back().values[export_names[i]] = call->output(i);
  }

  // A higher-order region this importer inlines: torch.export's grad-mode region (`with
  // torch.no_grad():` in a training-IR forward) and autocast region (`with torch.autocast(...)`,
  // enabled or not). Its operands are the node's inputs from `first_operand` on.
  //
  // Every node of the subgraph carries the region's state, the innermost region's for nested ones,
  // and runs under it, in the interpreter and in every trace of it: grad mode
  // (graph/grad_mode_region.h: nothing computed under no_grad requires grad, and an in-place op
  // there writes into a tensor that requires grad without changing its history, as in eager), or
  // autocast (AutocastRegion: libtorch's autocast kernels insert the casts eager inserts).
  void inline_region(const Json& node, std::size_t first_operand, std::optional<bool> grad_enabled,
                     std::optional<AutocastRegion> autocast) {
    const Json& inputs = node.at("inputs");
    if (inputs.size() < first_operand) fail_node(fmt::format("expected {} leading arguments", first_operand));
    const Json& subgraph = inputs[first_operand - 1].at("arg").at("as_graph").at("graph");
    const Json& sub_inputs = subgraph.at("inputs");
    if (sub_inputs.size() != inputs.size() - first_operand)
      fail_node(fmt::format("the subgraph takes {} inputs, the node passes {}", sub_inputs.size(),
                            inputs.size() - first_operand));
    Scope inner(subgraph);
    const std::string outer_target = target_, outer_name = node_name_;
    for (std::size_t i = 0; i < sub_inputs.size(); ++i) {
      const Json& operand = inputs[i + first_operand].at("arg");
      if (union_key(operand) != "as_tensor" || union_key(sub_inputs[i]) != "as_tensor")
        fail_node(fmt::format("operand {} of the region is not a tensor", i));
      Value* v = value(operand.at("as_tensor").at("name").get<std::string>());
      inner.values[sub_inputs[i].at("as_tensor").at("name").get<std::string>()] = v;
    }
    scopes_.push_back(std::move(inner));
    if (autocast) autocast_.push_back(autocast->to_attr());
    // An enabling region outside any disabling one changes nothing for a training call, and an
    // inference call is compiled without autograd: it is inlined as is.
    const bool grad_region = grad_enabled && (!*grad_enabled || !grad_mode_.empty());
    if (grad_region) grad_mode_.emplace_back(grad_mode_region_text(*grad_enabled));
    for (const Json& sub_node : subgraph.at("nodes")) add_node(sub_node);
    if (grad_region) grad_mode_.pop_back();
    if (autocast) autocast_.pop_back();
    std::vector<Value*> results;
    for (const Json& out : subgraph.at("outputs")) {
      if (union_key(out) != "as_tensor") fail_node("a region returning a non-tensor is not supported");
      results.push_back(value(out.at("as_tensor").at("name").get<std::string>()));
    }
    scopes_.pop_back();
    target_ = outer_target;
    node_name_ = outer_name;
    std::vector<std::string> names;
    for (const Json& out : node.at("outputs")) {
      if (union_key(out) == "as_tensor")
        names.push_back(out.at("as_tensor").at("name").get<std::string>());
      else if (union_key(out) == "as_tensors")
        for (const Json& t : out.at("as_tensors")) names.push_back(t.at("name").get<std::string>());
      else
        fail_node(fmt::format("output kind '{}' of a region is not supported", union_key(out)));
    }
    if (names.size() > results.size())
      fail_node(fmt::format("the node names {} results, its subgraph returns {}", names.size(), results.size()));
    for (std::size_t i = 0; i < names.size(); ++i) scopes_.back().values[names[i]] = results[i];
  }

  // wrap_with_set_grad_enabled(enabled, subgraph, *operands)
  void inline_grad_mode_region(const Json& node) {
    const Json& inputs = node.at("inputs");
    if (inputs.size() < 2) fail_node("expected (enabled, subgraph, operands...)");
    const bool enabled = inputs[0].at("arg").at("as_bool").get<bool>();
    inline_region(node, 2, enabled, std::nullopt);
  }

  // wrap_with_autocast(device_type, dtype, enabled, cache_enabled, subgraph, *operands)
  void inline_autocast_region(const Json& node) {
    const Json& inputs = node.at("inputs");
    if (inputs.size() < 5) fail_node("expected (device_type, dtype, enabled, cache_enabled, subgraph, operands...)");
    AutocastRegion region;
    const std::string device_type = inputs[0].at("arg").at("as_string").get<std::string>();
    try {
      region.device_type = c10::Device(device_type).type();
    } catch (const std::exception&) { fail_node(fmt::format("unknown autocast device type '{}'", device_type)); }
    const Json& dtype = inputs[1].at("arg");
    if (union_key(dtype) == "as_scalar_type")
      region.dtype = dtype_from_serde(dtype.at("as_scalar_type").get<int64_t>());
    region.enabled = inputs[2].at("arg").at("as_bool").get<bool>();
    // cache_enabled only changes whether eager reuses a weight's cast: not what is computed.
    inline_region(node, 5, std::nullopt, region);
  }

  void add_node(const Json& node) {
    target_ = node.at("target").get<std::string>();
    node_name_ = node.value("name", std::string("?"));
    try {
      if (target_ == "torch.ops.higher_order.wrap_with_set_grad_enabled") return inline_grad_mode_region(node);
      if (target_ == "torch.ops.higher_order.wrap_with_autocast") return inline_autocast_region(node);
      if (evaluate_symbolic(node)) return;
      if (target_.rfind(kOpsPrefix, 0) != 0)
        fail_node("this target is not an operator (torch.ops.*) nor symbolic arithmetic this importer evaluates");
      add_call(node);
    } catch (const Pt2Error&) { throw; } catch (const std::exception& e) {
      fail_node(error_text(e));
    }
  }

  // The export's names in one graph: the top one, or a subgraph of a grad-mode region (which
  // reuses outer names for its own values).
  struct Scope {
    explicit Scope(const Json& graph_json) {
      const Json& tensor_values = graph_json.at("tensor_values");
      for (auto it = tensor_values.begin(); it != tensor_values.end(); ++it) metas.emplace(it.key(), &it.value());
    }
    std::unordered_map<std::string, const Json*> metas;
    std::unordered_map<std::string, Value*> values;
  };

  const Json& json_;
  Graph graph_;
  const SymbolValues& symbols_;
  std::string_view where_;
  std::vector<Scope> scopes_;
  std::unordered_map<std::string, int64_t> sym_ints_;
  std::unordered_map<std::string, bool> sym_bools_;
  std::unordered_map<std::string, std::string> data_dependent_;  // symbolic value -> the symbols it depends on
  std::string target_;
  std::string node_name_;
  std::vector<std::string> autocast_;   // the autocast regions being imported, innermost last (attribute text)
  std::vector<std::string> grad_mode_;  // the grad-mode regions likewise
};

}  // namespace

Graph import_graph(const Json& graph_json, std::string graph_name, const SymbolValues& symbols,
                   std::string_view where) {
  return GraphImporter(graph_json, std::move(graph_name), symbols, where).run();
}

}  // namespace aotpipe::pt2
