#include <aotpipe/runtime/eager_equivalence.h>

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/csrc/autograd/functions/accumulate_grad.h>

#include <optional>
#include <unordered_map>
#include <unordered_set>

namespace aotpipe {
namespace {

bool aliases(const at::Tensor& a, const at::Tensor& b) {
  return a.defined() && b.defined() && a.storage().is_alias_of(b.storage());
}

// The leaves the inputs were computed from (an input that is a leaf is its own): gradients are
// compared on them, as PyTorch's tests compare `.grad` of leaves. A mutated non-leaf input's
// own history is rewritten by the mutation (eagerly by the op, compiled by the epilogue's
// copy_), so a gradient "with respect to the input" is not a stable thing to compare.
TensorList leaves_of(const TensorList& inputs) {
  TensorList leaves;
  std::unordered_set<const c10::TensorImpl*> seen;
  std::vector<torch::autograd::Node*> stack;
  std::unordered_set<torch::autograd::Node*> visited;
  for (const auto& i : inputs) {
    if (!i.defined() || !i.requires_grad()) continue;
    if (i.is_leaf()) {
      if (seen.insert(i.unsafeGetTensorImpl()).second) leaves.push_back(i);
    } else {
      stack.push_back(i.grad_fn().get());
    }
  }
  while (!stack.empty()) {
    torch::autograd::Node* node = stack.back();
    stack.pop_back();
    if (!node || !visited.insert(node).second) continue;
    if (auto* acc = dynamic_cast<torch::autograd::AccumulateGrad*>(node)) {
      if (seen.insert(acc->variable.unsafeGetTensorImpl()).second) leaves.push_back(acc->variable);
      continue;
    }
    for (const auto& edge : node->next_edges()) stack.push_back(edge.function.get());
  }
  return leaves;
}

TensorList grads_of(const TensorList& leaves, const TensorList& outputs, uint64_t seed) {
  at::Tensor loss;
  auto gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  for (const auto& o : outputs) {
    if (!o.defined() || !o.requires_grad() || !o.is_floating_point()) continue;
    // Drawn on the CPU (the generator's device), then moved: the same weights on any device; a
    // float64 reference run draws the float32 weights its float32 twin draws.
    const c10::ScalarType draw_type = o.scalar_type() == c10::kDouble ? c10::kFloat : o.scalar_type();
    at::Tensor w = at::randn(o.sizes(), gen, o.options().device(c10::kCPU).dtype(draw_type).requires_grad(false))
                       .to(o.options().requires_grad(false));
    at::Tensor term = (o * w).sum();
    loss = loss.defined() ? loss + term : term;
  }
  if (!loss.defined() || leaves.empty()) return {};
  return torch::autograd::grad({loss}, leaves, {}, /*retain_graph=*/false, /*create_graph=*/false,
                               /*allow_unused=*/true);
}

bool close(const at::Tensor& a, const at::Tensor& b, EquivalenceTolerance tol) {
  if (a.scalar_type() != b.scalar_type()) return false;
  if (a.is_floating_point() || a.is_complex()) return at::allclose(a, b, tol.rtol, tol.atol, /*equal_nan=*/true);
  return at::equal(a, b);
}

// Gradients are mostly sums over a batch, which a compiled graph may add up in another order:
// their rounding error scales with the magnitude of the summed terms, not of each result, so the
// absolute tolerance grows with the largest gradient entry.
bool gradients_close(const at::Tensor& eager, const at::Tensor& compiled, EquivalenceTolerance tol) {
  if (eager.numel() > 0 && (eager.is_floating_point() || eager.is_complex()))
    tol.atol += tol.rtol * at::nan_to_num(eager.abs(), 0.0, 0.0, 0.0).max().item<double>();  // NaNs compare equal
  return close(eager, compiled, tol);
}

// What a float64 run of the eager function computed, when it could run.
struct Fp64Reference {
  TensorList outputs;
  TensorList inputs;  // after the call
  TensorList grads;   // empty when the leaves do not match the float32 run's
};

// Float copies of the inputs in float64, sharing what the inputs share (a tensor passed twice is
// one copy); leaves that require grad stay leaves that require grad.
TensorList to_fp64(const TensorList& inputs) {
  std::unordered_map<const c10::TensorImpl*, at::Tensor> copies;
  TensorList out;
  for (const at::Tensor& t : inputs) {
    if (!t.defined() || !t.is_floating_point()) {
      out.push_back(t);
      continue;
    }
    auto [copy, fresh] = copies.try_emplace(t.unsafeGetTensorImpl());
    if (fresh) copy->second = t.detach().to(c10::kDouble).requires_grad_(t.requires_grad());
    out.push_back(copy->second);
  }
  return out;
}

std::optional<Fp64Reference> run_fp64(const Function& eager, const std::function<TensorList()>& make_inputs,
                                      std::size_t num_leaves) {
  try {
    at::manual_seed(1234);
    Fp64Reference ref;
    ref.inputs = to_fp64(make_inputs());
    const TensorList leaves = leaves_of(ref.inputs);
    ref.outputs = eager(ref.inputs);
    if (leaves.size() == num_leaves) ref.grads = grads_of(leaves, ref.outputs, 99);
    return ref;
  } catch (const std::exception&) {
    return std::nullopt;  // e.g. an op with a fixed float32 dtype meets a float64 tensor
  }
}

double rmse(const at::Tensor& a, const at::Tensor& b) {
  if (a.numel() == 0) return 0;
  return (a.to(c10::kDouble) - b.to(c10::kDouble)).square().mean().sqrt().item<double>();
}

bool as_close_as_eager(const at::Tensor& eager, const at::Tensor& compiled, const at::Tensor* fp64,
                       EquivalenceTolerance tol) {
  return fp64 && within_fp64_error(eager, compiled, *fp64, tol);
}

// The float64 reference's entry k, or null.
const at::Tensor* entry(const std::optional<Fp64Reference>& ref, TensorList Fp64Reference::*list, std::size_t k) {
  if (!ref || k >= ((*ref).*list).size()) return nullptr;
  return &((*ref).*list)[k];
}

double max_abs_difference(const at::Tensor& a, const at::Tensor& b) {
  if (a.numel() == 0) return 0;
  return (a.to(at::kDouble) - b.to(at::kDouble)).abs().max().item<double>();
}

template <typename... Args>
void differ(std::vector<std::string>& diffs, fmt::format_string<Args...> format, Args&&... args) {
  diffs.push_back(fmt::format(format, std::forward<Args>(args)...));
}

}  // namespace

// torch._dynamo.utils.same's rule for a float32 result against a float64 reference.
bool within_fp64_error(const at::Tensor& eager, const at::Tensor& result, const at::Tensor& fp64,
                       EquivalenceTolerance tol) {
  if (!fp64.defined() || !result.defined() || !eager.defined() || fp64.sizes() != result.sizes() ||
      eager.sizes() != result.sizes() || !result.is_floating_point())
    return false;
  return rmse(result, fp64) <= 2.0 * rmse(eager, fp64) + tol.rtol / 10.0;
}

std::vector<std::string> compare_with_eager(const Function& eager, const Function& compiled,
                                            const std::function<TensorList()>& make_inputs,
                                            EquivalenceTolerance tolerance) {
  return compare_with_eager(eager, compiled, make_inputs, tolerance, eager);
}

std::vector<std::string> compare_with_eager(const Function& eager, const Function& compiled,
                                            const std::function<TensorList()>& make_inputs,
                                            EquivalenceTolerance tolerance, const Function& eager_in_float64) {
  std::vector<std::string> diffs;
  at::manual_seed(1234);
  TensorList eager_in = make_inputs();
  at::manual_seed(1234);
  TensorList comp_in = make_inputs();
  const TensorList eager_leaves = leaves_of(eager_in);
  const TensorList comp_leaves = leaves_of(comp_in);
  TensorList eager_out = eager(eager_in);
  TensorList comp_out = compiled(comp_in);
  const std::optional<Fp64Reference> fp64 =
      tolerance.fp64_reference ? run_fp64(eager_in_float64, make_inputs, eager_leaves.size()) : std::nullopt;
  if (eager_out.size() != comp_out.size()) {
    differ(diffs, "{} outputs, eager gives {}", comp_out.size(), eager_out.size());
    return diffs;
  }
  for (std::size_t i = 0; i < eager_out.size(); ++i) {
    const at::Tensor& e = eager_out[i];
    const at::Tensor& c = comp_out[i];
    if (e.defined() != c.defined()) {
      differ(diffs, "output {} definedness: {}, eager {}", i, c.defined(), e.defined());
      continue;
    }
    if (!e.defined()) continue;
    if (e.sizes() != c.sizes()) {
      differ(diffs, "output {} sizes [{}], eager [{}]", i, fmt::join(c.sizes(), ", "), fmt::join(e.sizes(), ", "));
      continue;
    }
    if (e.scalar_type() != c.scalar_type())
      differ(diffs, "output {} dtype {}, eager {}", i, c10::toString(c.scalar_type()), c10::toString(e.scalar_type()));
    else if (!close(e, c, tolerance) && !as_close_as_eager(e, c, entry(fp64, &Fp64Reference::outputs, i), tolerance))
      differ(diffs, "output {} values (max abs difference {})", i, max_abs_difference(e, c));
    if (e.requires_grad() != c.requires_grad())
      differ(diffs, "output {} requires_grad {}, eager {}", i, c.requires_grad(), e.requires_grad());
    // grad_fn() first: it refreshes a view's stale grad_fn after an in-place op on its base,
    // which is_leaf() alone does not (Python's is_leaf does).
    (void)e.grad_fn();
    (void)c.grad_fn();
    if (e.is_leaf() != c.is_leaf()) differ(diffs, "output {} is_leaf {}, eager {}", i, c.is_leaf(), e.is_leaf());
    for (std::size_t k = 0; k < eager_in.size(); ++k)
      if (aliases(e, eager_in[k]) != aliases(c, comp_in[k]))
        differ(diffs, "output {} aliasing input {}: {}, eager {}", i, k, aliases(c, comp_in[k]),
               aliases(e, eager_in[k]));
    for (std::size_t k = 0; k < i; ++k)
      if (aliases(e, eager_out[k]) != aliases(c, comp_out[k]))
        differ(diffs, "output {} aliasing output {}: {}, eager {}", i, k, aliases(c, comp_out[k]),
               aliases(e, eager_out[k]));
  }
  for (std::size_t k = 0; k < eager_in.size(); ++k) {
    const at::Tensor& e = eager_in[k];
    const at::Tensor& c = comp_in[k];
    if (!e.defined() || !c.defined()) continue;
    if (e.sizes() != c.sizes()) {
      differ(diffs, "input {} sizes after the call [{}], eager [{}]", k, fmt::join(c.sizes(), ", "),
             fmt::join(e.sizes(), ", "));
      continue;
    }
    if (e.strides() != c.strides())
      differ(diffs, "input {} strides after the call [{}], eager [{}]", k, fmt::join(c.strides(), ", "),
             fmt::join(e.strides(), ", "));
    if (!close(e, c, tolerance) && !as_close_as_eager(e, c, entry(fp64, &Fp64Reference::inputs, k), tolerance))
      differ(diffs, "input {} values after the call", k);
  }
  const TensorList eager_grads = grads_of(eager_leaves, eager_out, 99);
  const TensorList comp_grads = grads_of(comp_leaves, comp_out, 99);
  if (eager_grads.size() != comp_grads.size()) {
    differ(diffs, "{} gradients, eager gives {}", comp_grads.size(), eager_grads.size());
    return diffs;
  }
  for (std::size_t k = 0; k < eager_grads.size(); ++k) {
    const at::Tensor& e = eager_grads[k];
    const at::Tensor& c = comp_grads[k];
    if (e.defined() != c.defined())
      differ(diffs, "gradient {} definedness: {}, eager {}", k, c.defined(), e.defined());
    else if (e.defined() && !gradients_close(e, c, tolerance) &&
             !as_close_as_eager(e, c, entry(fp64, &Fp64Reference::grads, k), tolerance))
      differ(diffs, "gradient {} values (max abs difference {}, max abs value {})", k, max_abs_difference(e, c),
             e.abs().max().item<double>());
  }
  return diffs;
}

}  // namespace aotpipe
