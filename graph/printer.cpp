// The text form, written into one buffer: the compile cache prints the canonical form of every
// program it looks up and the whole artifact of every store, so the printer allocates as little
// as it can (one string per graph, no temporary per value or argument).
#include <aotpipe/graph/graph.h>
#include <aotpipe/graph/printer.h>
#include <aotpipe/graph/text_format.h>

#include <fmt/format.h>

#include <cmath>
#include <string_view>
#include <unordered_map>

namespace aotpipe {

namespace {

void append_double(std::string& out, double v) {
  if (std::isnan(v)) {
    out += "nan";
    return;
  }
  if (std::isinf(v)) {
    out += v > 0 ? "inf" : "-inf";
    return;
  }
  const std::size_t start = out.size();
  fmt::format_to(std::back_inserter(out), "{}", v);  // shortest text that reads back to the same double
  if (std::string_view(out).substr(start).find_first_of(".e") == std::string_view::npos) out += ".0";
}

void append_quoted(std::string& out, std::string_view s) {
  out += '"';
  for (char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      default: out += c;
    }
  }
  out += '"';
}

// `items` appended one after the other by `append_item`, with ", " between them.
template <typename Items, typename AppendItem>
void append_separated(std::string& out, const Items& items, AppendItem append_item) {
  bool first = true;
  for (const auto& item : items) {
    if (!first) out += ", ";
    first = false;
    append_item(item);
  }
}

// Strips Optional[...] so the formatting follows the underlying type.
const c10::TypePtr& unwrap_optional(const c10::TypePtr& type) {
  if (type && type->kind() == c10::TypeKind::OptionalType) return type->expectRef<c10::OptionalType>().getElementType();
  return type;
}

void append_constant(std::string& out, const c10::IValue& value, const c10::TypePtr& schema_type);

void append_generic(std::string& out, const c10::IValue& v, const c10::TypePtr& type) {
  if (v.isNone()) {
    out += "None";
  } else if (v.isBool()) {
    out += v.toBool() ? "True" : "False";
  } else if (v.isInt()) {
    append_int(out, v.toInt());
  } else if (v.isDouble()) {
    append_double(out, v.toDouble());
  } else if (v.isString()) {
    append_quoted(out, v.toStringRef());
  } else if (v.isDevice()) {
    out += "device(";
    append_quoted(out, v.toDevice().str());
    out += ')';
  } else if (v.isList()) {
    static const c10::TypePtr kNoType;
    const c10::TypePtr& elem =
        type && type->kind() == c10::TypeKind::ListType ? type->expectRef<c10::ListType>().getElementType() : kNoType;
    out += '[';
    append_separated(out, v.toListRef(), [&](const c10::IValue& item) { append_constant(out, item, elem); });
    out += ']';
  } else {
    throw GraphError(fmt::format("cannot print a constant of kind {}", v.tagKind()));
  }
}

void append_constant(std::string& out, const c10::IValue& value, const c10::TypePtr& schema_type) {
  const c10::TypePtr& type = unwrap_optional(schema_type);
  if (type && value.isInt()) {
    switch (type->kind()) {
      case c10::TypeKind::ScalarTypeType: out += dtype_torch_name(static_cast<c10::ScalarType>(value.toInt())); return;
      case c10::TypeKind::LayoutType: out += layout_torch_name(static_cast<c10::Layout>(value.toInt())); return;
      case c10::TypeKind::MemoryFormatType:
        out += memory_format_torch_name(static_cast<c10::MemoryFormat>(value.toInt()));
        return;
      default: break;
    }
  }
  append_generic(out, value, type);
}

// Whether a constant argument prints as its schema default (then the text leaves it out). Ints,
// bools and None compare directly; anything else by its text, as the parser would read it.
bool prints_as(const c10::IValue& value, const c10::IValue& default_value, const c10::TypePtr& type) {
  if (value.isInt() && default_value.isInt()) return value.toInt() == default_value.toInt();
  if (value.isBool() && default_value.isBool()) return value.toBool() == default_value.toBool();
  if (value.isNone() || default_value.isNone()) return value.isNone() && default_value.isNone();
  return format_constant(value, type) == format_constant(default_value, type);
}

}  // namespace

std::string format_constant(const c10::IValue& value, const c10::TypePtr& schema_type) {
  std::string out;
  append_constant(out, value, schema_type);
  return out;
}

namespace {

// How the output names values: by their own names, or (canonical form) v0, v1, ... in the order
// they are defined, inputs first.
class Naming {
 public:
  Naming() = default;
  explicit Naming(const Graph& graph) : canonical_(true), graph_(&graph), index_(graph.value_id_limit(), kUnnamed) {
    std::size_t next = 0;
    for (const Value* v : graph.inputs()) index_[v->id()] = next++;
    for (const Node* node : graph.nodes())
      for (const Value* v : node->outputs()) index_[v->id()] = next++;
  }
  void append_ref(std::string& out, const Value& v) const {  // %name
    out += '%';
    if (!canonical_) {
      out += v.name();
      return;
    }
    const std::size_t index = v.graph() == graph_ && v.id() < index_.size() ? index_[v.id()] : kUnnamed;
    if (index == kUnnamed) throw GraphError("cannot print a value that is not defined in the graph");
    out += 'v';
    append_int(out, static_cast<int64_t>(index));
  }

 private:
  static constexpr std::size_t kUnnamed = static_cast<std::size_t>(-1);
  bool canonical_ = false;
  const Graph* graph_ = nullptr;
  std::vector<std::size_t> index_;  // by Value::id: the canonical number
};

void append_value_decl(std::string& out, const Value& value, const Naming& naming) {
  naming.append_ref(out, value);
  out += ": ";
  if (value.is_tensor() && value.meta())
    append_to(out, *value.meta());
  else
    out += to_string(value.type());
}

void append_argument(std::string& out, const Argument& arg, const c10::TypePtr& type, const Naming& naming) {
  if (arg.is_value()) {
    naming.append_ref(out, *arg.value());
  } else if (arg.is_constant()) {
    append_constant(out, arg.constant(), type);
  } else {
    out += '[';
    append_separated(out, arg.value_list().values, [&](const Value* v) {
      if (v)
        naming.append_ref(out, *v);
      else
        out += "None";
    });
    out += ']';
  }
}

void append_attrs(std::string& out, const std::map<std::string, std::string>& attrs) {
  if (attrs.empty()) return;
  out += " {";
  append_separated(out, attrs, [&](const auto& attr) {
    out += attr.first;
    out += '=';
    if (is_plain_word(attr.second))
      out += attr.second;
    else
      append_quoted(out, attr.second);
  });
  out += '}';
}

void append_call_args(std::string& out, const Node& node, const Naming& naming) {
  const auto& formals = node.schema().arguments();
  const auto& args = node.args();
  // Arguments equal to their schema default are left out (the parser puts them back):
  // trailing positional ones, and keyword-only ones anywhere.
  auto is_default = [&](std::size_t i) {
    const auto& def = formals[i].default_value();
    return def && args[i].is_constant() && prints_as(args[i].constant(), *def, formals[i].real_type());
  };
  std::size_t last_positional = 0;
  for (std::size_t i = 0; i < formals.size(); ++i)
    if (!formals[i].kwarg_only() && !is_default(i)) last_positional = i + 1;
  bool first = true;
  auto separate = [&] {
    if (!first) out += ", ";
    first = false;
  };
  for (std::size_t i = 0; i < formals.size(); ++i) {
    if (formals[i].kwarg_only()) {
      if (is_default(i)) continue;
      separate();
      out += formals[i].name();
      out += '=';
      append_argument(out, args[i], formals[i].real_type(), naming);
    } else if (i < last_positional) {
      separate();
      append_argument(out, args[i], formals[i].real_type(), naming);
    }
  }
}

void append_node(std::string& out, const Node& node, const Naming& naming) {
  append_separated(out, node.outputs(), [&](const Value* v) { append_value_decl(out, *v, naming); });
  if (!node.outputs().empty()) out += " = ";
  if (node.is_call()) {
    const auto& name = node.schema().operator_name();
    out += name.name;
    if (!name.overload_name.empty()) {
      out += '.';
      out += name.overload_name;
    }
    out += '(';
    append_call_args(out, node, naming);
    out += ')';
  } else {
    out += "constant(";
    append_quoted(out, node.constant_name());
    out += ')';
  }
  append_attrs(out, node.attrs());
}

std::string graph_text(const Graph& graph, std::string_view graph_name, const Naming& naming) {
  std::string out;
  out.reserve(64 + 96 * graph.num_nodes());
  out += "graph ";
  if (is_plain_word(graph_name))
    out += graph_name;
  else
    append_quoted(out, graph_name);
  out += '(';
  append_separated(out, graph.inputs(), [&](const Value* in) { append_value_decl(out, *in, naming); });
  out += "):\n";
  for (const Node* node : graph.nodes()) {
    out += "  ";
    append_node(out, *node, naming);
    out += '\n';
  }
  out += "  return (";
  append_separated(out, graph.outputs(), [&](const Value* v) { naming.append_ref(out, *v); });
  out += ")\n";
  return out;
}
}  // namespace

std::string format_value_decl(const Value& value) {
  std::string out;
  append_value_decl(out, value, Naming{});
  return out;
}

std::string print_node(const Node& node) {
  std::string out;
  append_node(out, node, Naming{});
  return out;
}

std::string print_graph(const Graph& graph) { return graph_text(graph, graph.name(), Naming{}); }

std::string print_graph_canonical(const Graph& graph) { return graph_text(graph, "g", Naming(graph)); }

}  // namespace aotpipe
