#include <aotpipe/graph/graph.h>
#include <aotpipe/graph/printer.h>
#include <aotpipe/graph/text_format.h>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cmath>
#include <string_view>
#include <unordered_map>

namespace aotpipe {

namespace {

std::string format_double(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  std::string text = fmt::format("{}", v);  // shortest text that reads back to the same double
  if (text.find_first_of(".e") == std::string::npos) text += ".0";
  return text;
}

std::string quote(std::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      default: out += c;
    }
  }
  return out + "\"";
}

// Strips Optional[...] so the formatting follows the underlying type.
c10::TypePtr unwrap_optional(const c10::TypePtr& type) {
  if (type && type->kind() == c10::TypeKind::OptionalType) return type->expectRef<c10::OptionalType>().getElementType();
  return type;
}

std::string format_generic(const c10::IValue& v, const c10::TypePtr& type) {
  if (v.isNone()) return "None";
  if (v.isBool()) return v.toBool() ? "True" : "False";
  if (v.isInt()) return std::to_string(v.toInt());
  if (v.isDouble()) return format_double(v.toDouble());
  if (v.isString()) return quote(v.toStringRef());
  if (v.isDevice()) return fmt::format("device({})", quote(v.toDevice().str()));
  if (v.isList()) {
    c10::TypePtr elem;
    if (type && type->kind() == c10::TypeKind::ListType) elem = type->expectRef<c10::ListType>().getElementType();
    std::string out = "[";
    bool first = true;
    for (const c10::IValue& item : v.toListRef()) {
      if (!first) out += ", ";
      first = false;
      out += format_constant(item, elem);
    }
    return out + "]";
  }
  throw GraphError(fmt::format("cannot print a constant of kind {}", v.tagKind()));
}
}  // namespace

std::string format_constant(const c10::IValue& value, const c10::TypePtr& schema_type) {
  c10::TypePtr type = unwrap_optional(schema_type);
  if (type && value.isInt()) {
    switch (type->kind()) {
      case c10::TypeKind::ScalarTypeType: return dtype_torch_name(static_cast<c10::ScalarType>(value.toInt()));
      case c10::TypeKind::LayoutType: return layout_torch_name(static_cast<c10::Layout>(value.toInt()));
      case c10::TypeKind::MemoryFormatType:
        return memory_format_torch_name(static_cast<c10::MemoryFormat>(value.toInt()));
      default: break;
    }
  }
  return format_generic(value, type);
}

namespace {

// How the output names values: by their own names, or (canonical form) v0, v1, ... in the order
// they are defined, inputs first.
class Naming {
 public:
  Naming() = default;
  explicit Naming(const Graph& graph) : canonical_(true) {
    std::size_t next = 0;
    for (const Value* v : graph.inputs()) index_.emplace(v, next++);
    for (const Node* node : graph.nodes())
      for (const Value* v : node->outputs()) index_.emplace(v, next++);
  }
  std::string ref(const Value& v) const {  // %name
    if (!canonical_) return "%" + v.name();
    auto it = index_.find(&v);
    if (it == index_.end()) throw GraphError("cannot print a value that is not defined in the graph");
    return fmt::format("%v{}", it->second);
  }

 private:
  bool canonical_ = false;
  std::unordered_map<const Value*, std::size_t> index_;
};

std::string value_decl(const Value& value, const Naming& naming) {
  std::string type =
      value.is_tensor() && value.meta() ? to_string(*value.meta()) : std::string(to_string(value.type()));
  return fmt::format("{}: {}", naming.ref(value), type);
}

}  // namespace

std::string format_value_decl(const Value& value) { return value_decl(value, Naming{}); }

namespace {
std::string format_argument(const Argument& arg, const c10::TypePtr& type, const Naming& naming) {
  if (arg.is_value()) return naming.ref(*arg.value());
  if (arg.is_constant()) return format_constant(arg.constant(), type);
  std::string out = "[";
  bool first = true;
  for (Value* v : arg.value_list().values) {
    if (!first) out += ", ";
    first = false;
    out += v ? naming.ref(*v) : "None";
  }
  return out + "]";
}

std::string format_attrs(const std::map<std::string, std::string>& attrs) {
  if (attrs.empty()) return {};
  std::string out = " {";
  bool first = true;
  for (const auto& [key, value] : attrs) {
    if (!first) out += ", ";
    first = false;
    out += key + "=" + (is_plain_word(value) ? value : quote(value));
  }
  return out + "}";
}

std::string format_call_args(const Node& node, const Naming& naming) {
  const auto& formals = node.schema().arguments();
  const auto& args = node.args();
  // Arguments equal to their schema default are left out (the parser puts them back):
  // trailing positional ones, and keyword-only ones anywhere.
  auto is_default = [&](std::size_t i) {
    const auto& def = formals[i].default_value();
    return def && args[i].is_constant() &&
           format_constant(args[i].constant(), formals[i].real_type()) == format_constant(*def, formals[i].real_type());
  };
  std::size_t last_positional = 0;
  for (std::size_t i = 0; i < formals.size(); ++i)
    if (!formals[i].kwarg_only() && !is_default(i)) last_positional = i + 1;
  std::vector<std::string> parts;
  for (std::size_t i = 0; i < formals.size(); ++i) {
    if (formals[i].kwarg_only()) {
      if (!is_default(i))
        parts.push_back(formals[i].name() + "=" + format_argument(args[i], formals[i].real_type(), naming));
    } else if (i < last_positional) {
      parts.push_back(format_argument(args[i], formals[i].real_type(), naming));
    }
  }
  return fmt::format("{}", fmt::join(parts, ", "));
}

std::string node_text(const Node& node, const Naming& naming) {
  std::vector<std::string> decls;
  for (Value* out : node.outputs()) decls.push_back(value_decl(*out, naming));
  std::string lhs = decls.empty() ? "" : fmt::format("{} = ", fmt::join(decls, ", "));
  std::string rhs = node.is_call() ? fmt::format("{}({})", node.qualified_name(), format_call_args(node, naming))
                                   : fmt::format("constant({})", quote(node.constant_name()));
  return lhs + rhs + format_attrs(node.attrs());
}

std::string graph_text(const Graph& graph, std::string_view graph_name, const Naming& naming) {
  std::vector<std::string> params;
  for (Value* in : graph.inputs()) params.push_back(value_decl(*in, naming));
  std::string name = is_plain_word(graph_name) ? std::string(graph_name) : quote(graph_name);
  std::string out = fmt::format("graph {}({}):\n", name, fmt::join(params, ", "));
  for (const Node* node : graph.nodes()) out += "  " + node_text(*node, naming) + "\n";
  std::vector<std::string> results;
  for (Value* v : graph.outputs()) results.push_back(naming.ref(*v));
  out += fmt::format("  return ({})\n", fmt::join(results, ", "));
  return out;
}
}  // namespace

std::string print_node(const Node& node) { return node_text(node, Naming{}); }

std::string print_graph(const Graph& graph) { return graph_text(graph, graph.name(), Naming{}); }

std::string print_graph_canonical(const Graph& graph) { return graph_text(graph, "g", Naming(graph)); }

}  // namespace aotpipe
