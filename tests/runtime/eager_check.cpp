#include "eager_check.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <torch/csrc/autograd/functions/accumulate_grad.h>
#include <torch/torch.h>

#include <unordered_set>

namespace aotpipe::testing {
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
    at::Tensor w = at::randn(o.sizes(), gen, o.options().requires_grad(false));
    at::Tensor term = (o * w).sum();
    loss = loss.defined() ? loss + term : term;
  }
  if (!loss.defined() || leaves.empty()) return {};
  return torch::autograd::grad({loss}, leaves, {}, /*retain_graph=*/false, /*create_graph=*/false, /*allow_unused=*/true);
}

}  // namespace

void expect_matches_eager(const Function& eager, const std::function<TensorList(const TensorList&)>& compiled,
                          const std::function<TensorList()>& make_inputs, const std::string& label, double rtol,
                          double atol) {
  at::manual_seed(1234);
  TensorList eager_in = make_inputs();
  at::manual_seed(1234);
  TensorList comp_in = make_inputs();
  const TensorList eager_leaves = leaves_of(eager_in);
  const TensorList comp_leaves = leaves_of(comp_in);
  TensorList eager_out = eager(eager_in);
  TensorList comp_out = compiled(comp_in);
  ASSERT_EQ(eager_out.size(), comp_out.size()) << label;
  for (std::size_t i = 0; i < eager_out.size(); ++i) {
    const at::Tensor& e = eager_out[i];
    const at::Tensor& c = comp_out[i];
    ASSERT_EQ(e.sizes(), c.sizes()) << label << ": output " << i;
    EXPECT_TRUE(at::allclose(e, c, rtol, atol, /*equal_nan=*/true)) << label << ": output " << i << " values";
    EXPECT_EQ(e.scalar_type(), c.scalar_type()) << label << ": output " << i;
    EXPECT_EQ(e.requires_grad(), c.requires_grad()) << label << ": output " << i << " requires_grad";
    EXPECT_EQ(e.is_leaf(), c.is_leaf()) << label << ": output " << i << " is_leaf";
    for (std::size_t k = 0; k < eager_in.size(); ++k)
      EXPECT_EQ(aliases(e, eager_in[k]), aliases(c, comp_in[k]))
          << label << ": output " << i << " aliasing input " << k;
    for (std::size_t k = 0; k < i; ++k)
      EXPECT_EQ(aliases(e, eager_out[k]), aliases(c, comp_out[k]))
          << label << ": output " << i << " aliasing output " << k;
  }
  for (std::size_t k = 0; k < eager_in.size(); ++k) {
    ASSERT_EQ(eager_in[k].sizes(), comp_in[k].sizes()) << label << ": input " << k << " sizes after the call";
    EXPECT_EQ(eager_in[k].strides(), comp_in[k].strides()) << label << ": input " << k << " strides after the call";
    EXPECT_TRUE(at::allclose(eager_in[k], comp_in[k], rtol, atol, true)) << label << ": input " << k << " after the call";
  }
  TensorList eg = grads_of(eager_leaves, eager_out, 99);
  TensorList cg = grads_of(comp_leaves, comp_out, 99);
  ASSERT_EQ(eg.size(), cg.size()) << label;
  for (std::size_t k = 0; k < eg.size(); ++k) {
    at::Tensor e = eg[k].defined() ? eg[k] : at::Tensor();
    at::Tensor c = cg[k].defined() ? cg[k] : at::Tensor();
    EXPECT_EQ(e.defined(), c.defined()) << label << ": gradient " << k << " definedness";
    if (e.defined() && c.defined())
      EXPECT_TRUE(at::allclose(e, c, rtol, atol, true)) << label << ": gradient " << k;
  }
}

}  // namespace aotpipe::testing
