#include <aotpipe/graph/printer.h>
#include <aotpipe/graph/verifier.h>

#include <fmt/format.h>

#include <unordered_map>
#include <unordered_set>

namespace aotpipe {

std::string_view to_string(VerifyErrorKind kind) {
  switch (kind) {
    case VerifyErrorKind::UseBeforeDefinition: return "use-before-definition";
    case VerifyErrorKind::ForeignValue: return "foreign-value";
    case VerifyErrorKind::ArgumentCount: return "argument-count";
    case VerifyErrorKind::ArgumentType: return "argument-type";
    case VerifyErrorKind::OutputCount: return "output-count";
    case VerifyErrorKind::OutputType: return "output-type";
    case VerifyErrorKind::MissingTensorMeta: return "missing-tensor-meta";
    case VerifyErrorKind::DanglingOutput: return "dangling-output";
    case VerifyErrorKind::UnusedValue: return "unused-value";
    case VerifyErrorKind::UnboundConstant: return "unbound-constant";
  }
  return "?";
}

namespace {
std::string join_messages(const std::vector<VerifyIssue>& issues) {
  std::string text =
      fmt::format("graph verification failed ({} problem{}):", issues.size(), issues.size() == 1 ? "" : "s");
  for (const auto& issue : issues) text += fmt::format("\n  [{}] {}", to_string(issue.kind), issue.message);
  return text;
}

// Whether a constant fits a (non-optional, non-tensor) schema type.
bool constant_fits(const c10::IValue& v, const c10::TypePtr& type) {
  switch (type->kind()) {
    case c10::TypeKind::OptionalType:
      return v.isNone() || constant_fits(v, type->expectRef<c10::OptionalType>().getElementType());
    case c10::TypeKind::IntType:
    case c10::TypeKind::SymIntType: return v.isInt();
    case c10::TypeKind::FloatType:
    case c10::TypeKind::SymFloatType: return v.isDouble() || v.isInt();
    case c10::TypeKind::BoolType:
    case c10::TypeKind::SymBoolType: return v.isBool();
    case c10::TypeKind::NumberType: return v.isInt() || v.isDouble() || v.isBool() || v.isComplexDouble();
    case c10::TypeKind::StringType: return v.isString();
    case c10::TypeKind::DeviceObjType: return v.isDevice();
    case c10::TypeKind::ScalarTypeType:
    case c10::TypeKind::LayoutType:
    case c10::TypeKind::MemoryFormatType: return v.isInt();
    case c10::TypeKind::GeneratorType: return false;  // generators are never graph constants
    case c10::TypeKind::ListType: {
      if (!v.isList()) return false;
      auto elem = type->expectRef<c10::ListType>().getElementType();
      for (const c10::IValue& item : v.toListRef())
        if (!constant_fits(item, elem)) return false;
      return true;
    }
    default: return false;
  }
}

bool value_fits(const Value& v, const c10::TypePtr& type) {
  switch (type->kind()) {
    case c10::TypeKind::OptionalType: return value_fits(v, type->expectRef<c10::OptionalType>().getElementType());
    case c10::TypeKind::TensorType: return v.type() == ValueType::Tensor;
    case c10::TypeKind::IntType:
    case c10::TypeKind::SymIntType: return v.type() == ValueType::Int;
    case c10::TypeKind::FloatType: return v.type() == ValueType::Float || v.type() == ValueType::Int;
    case c10::TypeKind::BoolType: return v.type() == ValueType::Bool;
    case c10::TypeKind::NumberType: return v.type() != ValueType::Tensor;
    default: return false;
  }
}

std::string describe_argument(const Argument& arg) {
  if (arg.is_value()) return fmt::format("%{} ({})", arg.value()->name(), to_string(arg.value()->type()));
  if (arg.is_constant())
    return fmt::format("constant {} ({})", format_constant(arg.constant(), nullptr), arg.constant().tagKind());
  return "a list of values";
}

class Verifier {
 public:
  Verifier(const Graph& graph, const VerifyOptions& options) : graph_(graph), options_(options) {}

  std::vector<VerifyIssue> run() {
    uses_ = graph_.compute_uses();
    for (Value* out : graph_.outputs()) uses_[out];
    for (Value* in : graph_.inputs()) define(*in);
    for (std::size_t i = 0; i < graph_.num_nodes(); ++i) check_node(*graph_.nodes()[i]);
    check_outputs();
    if (!options_.allow_dead_code) check_dead_code();
    return std::move(issues_);
  }

 private:
  template <class... Args>
  void report(VerifyErrorKind kind, fmt::format_string<Args...> format, Args&&... args) {
    issues_.push_back(
        {kind, fmt::format("graph '{}': {}", graph_.name(), fmt::format(format, std::forward<Args>(args)...))});
  }

  void define(const Value& v) {
    defined_.insert(&v);
    // A node's unread result may be an undefined tensor (e.g. a gradient nobody asked for):
    // it needs no metadata. Inputs and read values do.
    bool needs_meta = v.is_input() || uses_.count(&v);
    if (options_.require_tensor_meta && needs_meta && v.is_tensor() && !v.meta())
      report(VerifyErrorKind::MissingTensorMeta, "tensor value %{} has no TensorMeta", v.name());
  }

  static std::string node_label(const Node& node) { return "node " + node.label(); }

  void check_read(const Node& node, const Value* v) {
    if (v->graph() != &graph_) {
      report(VerifyErrorKind::ForeignValue, "{} reads %{}, a value of another graph", node_label(node), v->name());
    } else if (!defined_.count(v)) {
      report(VerifyErrorKind::UseBeforeDefinition, "{} reads %{} before its definition", node_label(node), v->name());
    }
  }

  void check_node(const Node& node) {
    for (Value* v : node.inputs()) check_read(node, v);
    if (node.is_call())
      check_call(node);
    else if (options_.require_bound_constants && !graph_.tensor_constants().count(node.constant_name()))
      report(VerifyErrorKind::UnboundConstant, "constant %{} (\"{}\") has no tensor bound", node.output()->name(),
             node.constant_name());
    for (Value* out : node.outputs()) define(*out);
  }

  void check_call(const Node& node) {
    const auto& schema = node.schema();
    const auto& formals = schema.arguments();
    if (node.args().size() != formals.size()) {
      report(VerifyErrorKind::ArgumentCount, "{} has {} arguments, its schema takes {}", node_label(node),
             node.args().size(), formals.size());
    } else {
      for (std::size_t i = 0; i < formals.size(); ++i) check_argument(node, i, node.args()[i], formals[i]);
    }
    const auto& returns = schema.returns();
    bool list_return = returns.size() == 1 && returns[0].type()->kind() == c10::TypeKind::ListType;
    if (!list_return && node.num_outputs() != returns.size()) {
      report(VerifyErrorKind::OutputCount, "{} defines {} values, its schema returns {}", node_label(node),
             node.num_outputs(), returns.size());
      return;
    }
    for (std::size_t i = 0; i < node.num_outputs(); ++i) {
      const c10::TypePtr& type =
          list_return ? returns[0].type()->expectRef<c10::ListType>().getElementType() : returns[i].type();
      if (!value_fits(*node.output(i), type))
        report(VerifyErrorKind::OutputType, "{} defines %{} as {}, the schema returns {}", node_label(node),
               node.output(i)->name(), to_string(node.output(i)->type()), type->str());
    }
  }

  void check_argument(const Node& node, std::size_t index, const Argument& arg, const c10::Argument& formal) {
    const c10::TypePtr& type = formal.type();
    bool optional = type->kind() == c10::TypeKind::OptionalType;
    c10::TypePtr inner = optional ? type->expectRef<c10::OptionalType>().getElementType() : type;
    bool ok = false;
    if (arg.is_value()) {
      ok = value_fits(*arg.value(), type);
    } else if (arg.is_value_list()) {
      if (inner->kind() == c10::TypeKind::ListType) {
        auto elem = inner->expectRef<c10::ListType>().getElementType();
        bool elem_optional = elem->kind() == c10::TypeKind::OptionalType;
        ok = true;
        for (Value* v : arg.value_list().values) ok = ok && (v ? v->type() == ValueType::Tensor : elem_optional);
        auto elem_inner = elem_optional ? elem->expectRef<c10::OptionalType>().getElementType() : elem;
        ok = ok && elem_inner->kind() == c10::TypeKind::TensorType;
      }
    } else {
      ok = inner->kind() == c10::TypeKind::TensorType ? (optional && arg.constant().isNone())
                                                      : constant_fits(arg.constant(), type);
    }
    if (!ok)
      report(VerifyErrorKind::ArgumentType, "{}: argument {} '{}' expects {}, got {}", node_label(node), index,
             formal.name(), type->str(), describe_argument(arg));
  }

  void check_outputs() {
    for (std::size_t i = 0; i < graph_.num_outputs(); ++i) {
      const Value* v = graph_.outputs()[i];
      if (v->graph() != &graph_ || !defined_.count(v))
        report(VerifyErrorKind::DanglingOutput, "output {} (%{}) is not defined in this graph", i, v->name());
    }
  }

  void check_dead_code() {
    for (const Node* node : graph_.nodes()) {
      if (node->has_side_effects() || node->num_outputs() == 0) continue;
      bool used = false;
      for (Value* v : node->outputs()) used = used || uses_.count(v);
      if (!used) report(VerifyErrorKind::UnusedValue, "{}: no value it defines is used (dead code)", node_label(*node));
    }
  }

  const Graph& graph_;
  const VerifyOptions& options_;
  std::unordered_set<const Value*> defined_;
  std::map<const Value*, std::vector<Node*>> uses_;  // graph outputs included, as readers-less entries
  std::vector<VerifyIssue> issues_;
};
}  // namespace

VerifyError::VerifyError(std::vector<VerifyIssue> issues)
    : std::runtime_error(join_messages(issues)), issues_(std::move(issues)) {}

std::vector<VerifyIssue> verify_issues(const Graph& graph, const VerifyOptions& options) {
  return Verifier(graph, options).run();
}

void verify(const Graph& graph, const VerifyOptions& options) {
  auto issues = verify_issues(graph, options);
  if (!issues.empty()) throw VerifyError(std::move(issues));
}

}  // namespace aotpipe
