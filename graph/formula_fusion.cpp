#include <aotpipe/graph/autocast_region.h>
#include <aotpipe/graph/grad_mode_region.h>
#include <aotpipe/graph/formula_fusion.h>

#include <ATen/core/Tensor.h>
#include <c10/core/ScalarType.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <numbers>
#include <optional>
#include <set>
#include <string_view>
#include <utility>

namespace aotpipe {

namespace {

// A polynomial in x and t = f(A(x)), the formula's one transcendental call: the coefficient of
// each (power of x, power of t). Exact zeros are dropped, so equal polynomials have equal keys.
using Monomial = std::pair<int, int>;
using Polynomial = std::map<Monomial, double>;

constexpr int kMaxPower = 6;           // x^6 is beyond every formula recognized
constexpr std::size_t kMaxCalls = 24;  // the longest formula is ten calls
// How far a coefficient may be from the formula's: what the dtype's kernels cannot tell apart
// (BLOOM's 0.79788456 is sqrt(2/pi) in float32, not in float64), and a little more.
double relative_tolerance(c10::ScalarType dtype) { return dtype == c10::ScalarType::Double ? 1e-12 : 1e-6; }

Polynomial constant(double c) { return c == 0.0 ? Polynomial{} : Polynomial{{{0, 0}, c}}; }

Polynomial sum(Polynomial a, const Polynomial& b, double scale_b) {
  for (const auto& [m, c] : b) {
    const double v = (a[m] += scale_b * c);
    if (v == 0.0) a.erase(m);
  }
  return a;
}

std::optional<Polynomial> product(const Polynomial& a, const Polynomial& b) {
  Polynomial p;
  for (const auto& [ma, ca] : a)
    for (const auto& [mb, cb] : b) {
      const Monomial m{ma.first + mb.first, ma.second + mb.second};
      if (m.first > kMaxPower || m.second > kMaxPower) return std::nullopt;
      const double v = (p[m] += ca * cb);
      if (v == 0.0) p.erase(m);
    }
  return p;
}

bool approximately(const Polynomial& actual, const Polynomial& expected, double tolerance) {
  if (actual.size() != expected.size()) return false;
  return std::ranges::all_of(expected, [&](const auto& term) {
    auto it = actual.find(term.first);
    return it != actual.end() && std::abs(it->second - term.second) <= tolerance * std::abs(term.second);
  });
}

enum class Transcendental : std::uint8_t { None, Tanh, Erf, Sigmoid };

std::optional<Transcendental> transcendental_of(std::string_view op) {
  if (op == "aten::tanh") return Transcendental::Tanh;
  if (op == "aten::erf") return Transcendental::Erf;
  if (op == "aten::sigmoid") return Transcendental::Sigmoid;
  return std::nullopt;
}

bool is_formula_call(std::string_view op) {
  static const std::set<std::string_view> ops = {
      "aten::add.Tensor",        "aten::add.Scalar", "aten::sub.Tensor", "aten::sub.Scalar", "aten::rsub.Tensor",
      "aten::rsub.Scalar",       "aten::mul.Tensor", "aten::mul.Scalar", "aten::div.Tensor", "aten::div.Scalar",
      "aten::pow.Tensor_Scalar", "aten::neg",        "aten::tanh",       "aten::erf",        "aten::sigmoid"};
  return ops.contains(op);
}

// A formula value as a polynomial, for one choice of x: every value it reads is x, a scalar
// constant or a formula call's result. Remembers the calls it went through.
class Normalizer {
 public:
  Normalizer(const Graph& graph, const Value* x) : graph_(graph), x_(x) {}

  std::optional<Polynomial> of(const Value* v) {
    if (v == x_) return Polynomial{{{1, 0}, 1.0}};
    if (auto c = scalar_value(v)) return constant(*c);
    if (auto it = memo_.find(v); it != memo_.end()) return it->second;
    Node* node = v->producer();
    if (!node || !node->is_call() || node->num_outputs() != 1 || calls_.size() >= kMaxCalls) return std::nullopt;
    auto p = of_call(*node);
    if (!p) return std::nullopt;
    calls_.push_back(node);
    memo_.emplace(v, *p);
    return p;
  }

  // The scalar a 0-dimensional constant tensor holds (a Python number of the export).
  std::optional<double> scalar_value(const Value* v) const {
    const Node* node = v->producer();
    if (!node || node->kind() != NodeKind::Constant) return std::nullopt;
    auto it = graph_.tensor_constants().find(node->constant_name());
    if (it == graph_.tensor_constants().end() || it->second.dim() != 0) return std::nullopt;
    const at::Tensor& t = it->second;
    if (!c10::isFloatingType(t.scalar_type()) && !c10::isIntegralType(t.scalar_type(), /*includeBool=*/false))
      return std::nullopt;
    return t.item<double>();
  }

  std::optional<double> scalar(const Argument& arg) const {
    if (arg.is_value()) return scalar_value(arg.value());
    if (!arg.is_constant()) return std::nullopt;
    const c10::IValue& c = arg.constant();
    if (c.isDouble()) return c.toDouble();
    if (c.isInt()) return static_cast<double>(c.toInt());
    return std::nullopt;
  }

  Transcendental function() const { return function_; }
  const Polynomial& function_argument() const { return argument_; }
  const std::vector<Node*>& calls() const { return calls_; }

 private:
  std::optional<Polynomial> operand(const Argument& arg) {
    if (auto c = scalar(arg)) return constant(*c);
    if (arg.is_value()) return of(arg.value());
    return std::nullopt;
  }

  std::optional<Polynomial> of_call(const Node& node) {
    const std::string op = node.qualified_name();
    if (!is_formula_call(op)) return std::nullopt;
    const auto& args = node.args();
    auto a = operand(args.at(0));
    if (!a) return std::nullopt;
    if (auto f = transcendental_of(op)) {
      // One transcendental call per formula, of a polynomial in x alone.
      if (function_ != Transcendental::None || std::ranges::any_of(*a, [](const auto& t) { return t.first.second; }))
        return std::nullopt;
      function_ = *f;
      argument_ = std::move(*a);
      return Polynomial{{{0, 1}, 1.0}};
    }
    if (op == "aten::neg") return sum({}, *a, -1.0);
    if (args.size() < 2) return std::nullopt;
    if (op == "aten::pow.Tensor_Scalar") {
      auto e = scalar(args[1]);
      if (!e || *e < 0 || *e > kMaxPower || *e != std::floor(*e)) return std::nullopt;
      Polynomial p = constant(1.0);
      for (int i = 0; i < static_cast<int>(*e); ++i) {
        auto next = product(p, *a);
        if (!next) return std::nullopt;
        p = std::move(*next);
      }
      return p;
    }
    if (op.starts_with("aten::div.")) {
      auto d = scalar(args[1]);
      if (!d || *d == 0.0 || args.size() > 2) return std::nullopt;  // no rounding mode
      return sum({}, *a, 1.0 / *d);
    }
    auto b = operand(args[1]);
    if (!b) return std::nullopt;
    if (op.starts_with("aten::mul.")) return product(*a, *b);
    const std::optional<double> alpha = args.size() > 2 ? scalar(args[2]) : 1.0;
    if (!alpha) return std::nullopt;
    if (op.starts_with("aten::add.")) return sum(*a, *b, *alpha);
    if (op.starts_with("aten::sub.")) return sum(*a, *b, -*alpha);
    return sum(*b, *a, -*alpha);  // rsub: other - alpha * self
  }

  const Graph& graph_;
  const Value* x_;
  std::map<const Value*, Polynomial> memo_;
  std::vector<Node*> calls_;
  Transcendental function_ = Transcendental::None;
  Polynomial argument_;
};

struct KnownFormula {
  const char* kernel;       // for FusedFormula::kernel
  const char* op;           // the replacing call
  const char* approximate;  // gelu's argument; null: none
  Transcendental function;
  Polynomial argument;  // of the transcendental call, in x
  Polynomial value;     // in x and t
};

const std::vector<KnownFormula>& known_formulas() {
  static const std::vector<KnownFormula> formulas = [] {
    const double beta = std::sqrt(2.0 / std::numbers::pi), kappa = 0.044715;
    const Polynomial half_x_one_plus_t = {{{1, 0}, 0.5}, {{1, 1}, 0.5}};
    return std::vector<KnownFormula>{
        {"aten::gelu(approximate='tanh')",
         "aten::gelu",
         "tanh",
         Transcendental::Tanh,
         {{{1, 0}, beta}, {{3, 0}, beta * kappa}},
         half_x_one_plus_t},
        {"aten::gelu", "aten::gelu", nullptr, Transcendental::Erf, {{{1, 0}, 1.0 / std::sqrt(2.0)}}, half_x_one_plus_t},
        {"aten::silu", "aten::silu", nullptr, Transcendental::Sigmoid, {{{1, 0}, 1.0}}, {{{1, 1}, 1.0}}},
    };
  }();
  return formulas;
}

struct Match {
  const KnownFormula* formula = nullptr;
  Value* x = nullptr;
  std::vector<Node*> calls;  // the formula's, its root last
};

bool same_shape_and_dtype(const Value& v, const TensorMeta& like) {
  return v.meta() && v.meta()->dtype == like.dtype && v.meta()->sizes == like.sizes;
}

// Whether the calls can go: nothing outside them reads what they make but the root's readers.
bool self_contained(const Graph& graph, const std::vector<Node*>& calls,
                    const std::map<const Value*, std::vector<Node*>>& uses) {
  const std::set<const Node*> inside(calls.begin(), calls.end());
  const Value* root = calls.back()->output();
  for (const Node* n : calls) {
    const Value* v = n->output();
    if (v == root) continue;
    if (std::ranges::find(graph.outputs(), v) != graph.outputs().end()) return false;
    auto it = uses.find(v);
    if (it != uses.end() && !std::ranges::all_of(it->second, [&](const Node* u) { return inside.contains(u); }))
      return false;
  }
  return true;
}

std::optional<Match> match_formula(const Graph& graph, const Node& root,
                                   const std::map<const Value*, std::vector<Node*>>& uses) {
  if (!root.is_call() || root.num_outputs() != 1 || !root.output()->meta()) return std::nullopt;
  const std::string op = root.qualified_name();
  if (!op.starts_with("aten::mul.") && !op.starts_with("aten::div.")) return std::nullopt;
  // Every tensor the formula's calls read is a candidate for x, nearest first.
  std::vector<Value*> candidates;
  {
    std::vector<const Node*> stack{&root};
    std::set<const Node*> seen{&root};
    while (!stack.empty() && seen.size() <= kMaxCalls) {
      const Node* n = stack.back();
      stack.pop_back();
      n->for_each_input([&](Value* v) {
        if (!v->is_tensor() || std::ranges::find(candidates, v) != candidates.end()) return;
        const Node* p = v->producer();
        if (p && p->kind() == NodeKind::Constant) return;
        candidates.push_back(v);
        if (p && p->is_call() && is_formula_call(p->qualified_name()) && seen.insert(p).second) stack.push_back(p);
      });
    }
  }
  const TensorMeta& out = *root.output()->meta();
  for (Value* x : candidates) {
    if (!same_shape_and_dtype(*x, out) || !c10::isFloatingType(out.dtype)) continue;
    Normalizer normalizer(graph, x);
    auto value = normalizer.of(root.output());
    if (!value || normalizer.function() == Transcendental::None) continue;
    const double tolerance = relative_tolerance(out.dtype);
    for (const KnownFormula& f : known_formulas()) {
      if (f.function != normalizer.function() ||
          !approximately(normalizer.function_argument(), f.argument, tolerance) ||
          !approximately(*value, f.value, tolerance))
        continue;
      const auto& calls = normalizer.calls();
      const bool fits = std::ranges::all_of(calls, [&](const Node* n) {
        return same_shape_and_dtype(*n->output(), out) && !n->attrs().contains(kAutocastAttr) &&
               !n->attrs().contains(kGradEnabledAttr);
      });
      if (fits && self_contained(graph, calls, uses)) return Match{&f, x, calls};
    }
  }
  return std::nullopt;
}

// Whether a call between the formula's first call and its root (at `root_index`) writes memory:
// the training IR keeps in-place ops, and x or an intermediate written there would make the
// formula's reads see different values, where the kernel reads x once, at the root.
bool mutates_between(const Graph& graph, const std::vector<Node*>& calls, std::size_t root_index) {
  std::size_t first = root_index;
  for (const Node* n : calls) first = std::min(first, graph.index_of(n));
  const auto nodes = graph.nodes();
  return std::any_of(nodes.begin() + static_cast<std::ptrdiff_t>(first),
                     nodes.begin() + static_cast<std::ptrdiff_t>(root_index),
                     [](const Node* n) { return n->has_side_effects(); });
}

struct Replacement {
  Node* kernel = nullptr;
  std::set<Node*> constants;  // the scalar constants the formula read: others may still read them
};

// Replaces the match's calls by the kernel's.
Replacement replace(Graph& graph, const Match& m) {
  Node* root = m.calls.back();
  Value* old = root->output();
  const std::string name = old->name();
  std::vector<Argument> args{m.x};
  if (m.formula->approximate) args.emplace_back(c10::IValue(std::string(m.formula->approximate)));
  std::vector<OutputSpec> outputs(1);
  outputs[0].meta = *old->meta();
  Node* kernel = graph.add_call(m.formula->op, std::move(args), std::move(outputs), root);
  kernel->attrs() = root->attrs();
  graph.replace_all_uses(old, kernel->output());
  Replacement r{kernel, {}};
  for (const Node* n : m.calls)
    n->for_each_input([&](Value* v) {
      if (v->producer() && v->producer()->kind() == NodeKind::Constant) r.constants.insert(v->producer());
    });
  graph.erase_nodes(m.calls);
  graph.rename(kernel->output(), name);
  return r;
}

}  // namespace

std::vector<FusedFormula> fuse_pointwise_formulas(Graph& graph) {
  std::vector<FusedFormula> fused;
  const bool any = std::ranges::any_of(
      graph.nodes(), [](const Node* n) { return n->is_call() && transcendental_of(n->qualified_name()).has_value(); });
  if (!any) return fused;
  auto uses = graph.compute_uses();
  for (std::size_t i = 0; i < graph.num_nodes(); ++i) {
    auto m = match_formula(graph, *graph.nodes()[i], uses);
    if (!m || mutates_between(graph, m->calls, i)) continue;
    const std::string value = m->calls.back()->output()->name();
    const std::size_t calls = m->calls.size();
    const Replacement r = replace(graph, *m);
    fused.push_back({m->formula->kernel, value, calls});
    // One count of readers serves both: which of the formula's constants nothing reads any more
    // (removed), and the next matches (erasing those constants changes no other value's readers).
    uses = graph.compute_uses();
    std::vector<Node*> unread;
    for (Node* c : r.constants)
      if (!uses.contains(c->output()) && std::ranges::find(graph.outputs(), c->output()) == graph.outputs().end())
        unread.push_back(c);
    graph.erase_nodes(unread);
    i = graph.index_of(r.kernel);
  }
  return fused;
}

}  // namespace aotpipe
