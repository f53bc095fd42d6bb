// The C++ twins of metadata_oracle.py's cases: same names, same order, same ops, same inputs.
// When a case changes on one side it must change on the other (metadata_diff_test checks that
// the two name lists agree).
#include "metadata_corpus.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <torch/csrc/autograd/custom_function.h>

#include <utility>

namespace aotpipe::testing {
namespace {

using at::Tensor;
using TL = TensorList;

// ---- input makers (metadata_oracle.py's ones / nonleaf / arange_f) ----------------------------
Tensor ones(at::IntArrayRef sizes, bool rg = false) {
  Tensor t = at::ones(sizes);
  if (rg) t.requires_grad_(true);
  return t;
}
// A non-leaf that requires grad: ones(...).clone() of a leaf requiring grad.
Tensor nonleaf(at::IntArrayRef sizes) { return ones(sizes, true).clone(); }

// Python's torch.autograd.Function returning its input unchanged (autograd wraps it as a view).
struct IdentityFn : public torch::autograd::Function<IdentityFn> {
  static Tensor forward(torch::autograd::AutogradContext* /*ctx*/, const Tensor& x) { return x; }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* /*ctx*/,
                                                 torch::autograd::variable_list grads) {
    return {grads[0] * 0.5};
  }
};

struct CloneFn : public torch::autograd::Function<CloneFn> {
  static Tensor forward(torch::autograd::AutogradContext* /*ctx*/, const Tensor& x) { return x.clone(); }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* /*ctx*/,
                                                 torch::autograd::variable_list grads) {
    return {grads[0]};
  }
};

TL cat(TL a, const TL& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

std::vector<MetadataCase> build() {
  std::vector<MetadataCase> c;
  auto add = [&](std::string name, std::function<TL()> inputs, Function fn, bool keep = false,
                 bool grad_enabled = true) {
    c.push_back(MetadataCase{std::move(name), std::move(fn), std::move(inputs), keep, grad_enabled});
  };

  // ============================ No mutation, plain outputs ============================
  add(
      "no_mutation_multi_output",
      [] {
        return TL{ones({3, 3}, true), ones({3, 3})};
      },
      [](const TL& x) {
        return TL{x[0] + x[1], x[0] - x[1]};
      });
  add(
      "no_mutation_no_grad_inputs",
      [] {
        return TL{ones({3, 3}), ones({3, 3})};
      },
      [](const TL& x) {
        return TL{x[0] * x[1], x[0].sum()};
      });
  add(
      "non_alias_dtype_and_noncontiguous",
      [] {
        return TL{ones({2, 3}, true)};
      },
      [](const TL& x) {
        const Tensor& a = x[0];
        return TL{a.to(at::kDouble) * 2, a.t() * 3, a.gt(0)};
      });

  // ============================ Data mutations ============================
  add(
      "input_mutation_simple",
      [] {
        return TL{nonleaf({3, 3})};
      },
      [](const TL& x) {
        Tensor a = x[0];
        a.mul_(2);
        return TL{a * 3};
      });
  add(
      "input_mutation_simple_no_grad_input",
      [] {
        return TL{ones({3, 3})};
      },
      [](const TL& x) {
        Tensor a = x[0];
        a.mul_(2);
        return TL{a * 3};
      });
  add(
      "input_mutation_simple_keep",
      [] {
        return TL{ones({3, 3})};
      },
      [](const TL& x) {
        Tensor a = x[0];
        a.mul_(2);
        return TL{a * 3};
      },
      /*keep=*/true);
  add(
      "input_mutation_simple_keep_requires_grad",
      [] {
        return TL{nonleaf({3, 3})};
      },
      [](const TL& x) {
        Tensor a = x[0];
        a.mul_(2);
        return TL{a * 3};
      },
      /*keep=*/true);
  add(
      "input_mutation_is_output",
      [] {
        return TL{nonleaf({3, 3})};
      },
      [](const TL& x) {
        Tensor a = x[0];
        a.mul_(2);
        return TL{a};
      });
  add(
      "input_mutation_multiple",
      [] {
        return TL{nonleaf({3, 3}), nonleaf({3, 3}), nonleaf({3, 3})};
      },
      [](const TL& x) {
        Tensor a = x[0], b = x[1], c = x[2];
        a.mul_(2);
        c.mul_(2);
        return TL{a + b + c};
      });
  add(
      "input_mutation_mixed_requires_grad_keep",
      [] {
        return TL{nonleaf({3, 3}), ones({3, 3})};
      },
      [](const TL& x) {
        Tensor a = x[0], b = x[1];
        a.add_(1);
        b.add_(1);
        return TL{a * b};
      },
      /*keep=*/true);
  add(
      "input_mutation_through_view",
      [] {
        return TL{nonleaf({4, 4})};
      },
      [](const TL& x) {
        Tensor a = x[0];
        a.view(-1).slice(0, 0, 4).mul_(2);
        return TL{a + 1};
      });
  add(
      "input_mutation_no_outputs", [] { return TL{ones({4})}; },
      [](const TL& x) {
        Tensor a = x[0];
        a.add_(1);
        return TL{};
      });

  // ============================ Metadata mutations, data + metadata ============================
  add(
      "input_mutation_metadata",
      [] {
        return TL{nonleaf({3, 3}), nonleaf({3, 3})};
      },
      [](const TL& x) {
        Tensor a = x[0], b = x[1];
        a.transpose_(1, 0);
        return TL{a + b};
      });
  add(
      "input_mutation_metadata_keep",
      [] {
        return TL{ones({3, 3}), ones({3, 3})};
      },
      [](const TL& x) {
        Tensor a = x[0], b = x[1];
        a.transpose_(1, 0);
        return TL{a + b};
      },
      /*keep=*/true);
  add(
      "input_mutation_metadata2",
      [] {
        return TL{nonleaf({3, 3})};
      },
      [](const TL& x) {
        Tensor a = x[0];
        a.transpose_(1, 0);
        a.mul_(2);
        return TL{a + 1};
      });
  add(
      "input_mutation_metadata2_keep",
      [] {
        return TL{ones({3, 3})};
      },
      [](const TL& x) {
        Tensor a = x[0];
        a.transpose_(1, 0);
        a.mul_(2);
        return TL{a + 1};
      },
      /*keep=*/true);
  add(
      "input_mutation_unsqueeze_",
      [] {
        return TL{nonleaf({2, 3})};
      },
      [](const TL& x) {
        Tensor a = x[0];
        a.unsqueeze_(0);
        return TL{a * 2};
      });
  add(
      "input_mutation_as_strided_",
      [] {
        return TL{nonleaf({2, 2})};
      },
      [](const TL& x) {
        Tensor a = x[0];
        a.as_strided_({2, 2}, {1, 2});
        return TL{a * 2};
      });
  add(
      "input_data_and_metadata_mutation",
      [] {
        return TL{nonleaf({3, 3})};
      },
      [](const TL& x) {
        Tensor a = x[0];
        a.t_();
        a[0].mul_(2);
        return TL{a.view(a.sizes())};
      });
  add(
      "view_and_inplace_view",
      [] {
        return TL{nonleaf({3, 3}), nonleaf({3, 3})};
      },
      [](const TL& x) {
        Tensor a = x[0], b = x[1];
        a.t_();
        return TL{b.view(b.sizes()), a.view(a.sizes())};
      });

  // ============================ Outputs aliasing inputs ============================
  add(
      "input_output_view_simple",
      [] {
        return TL{ones({2, 2}, true).add(1)};
      },
      [](const TL& x) { return TL{x[0].view(-1)}; });
  add(
      "input_output_view_simple_no_grad",
      [] {
        return TL{ones({2, 2}).add(1)};
      },
      [](const TL& x) { return TL{x[0].view(-1)}; });
  auto three_added = [] { return TL{ones({2, 2}, true).add(1), ones({2, 2}, true).add(1), ones({2, 2}, true).add(1)}; };
  add("input_output_view_mutate_multiple", three_added, [](const TL& x) {
    Tensor a = x[0], b = x[1], c = x[2];
    a.mul_(2);
    c.mul_(3);
    return TL{b.view({2, 2}), c.view({2, 2})};
  });
  add("input_output_view_metadata_mutate_multiple", three_added, [](const TL& x) {
    Tensor a = x[0], b = x[1], c = x[2];
    b.mul_(3);
    c.t_();
    return TL{a.view({2, 2}), b.view({2, 2}), c.view({2, 2})};
  });
  add(
      "input_mutation_and_output_view",
      [] {
        return TL{ones({2, 2}, true).add(1)};
      },
      [](const TL& x) {
        Tensor a = x[0];
        a.add_(1);
        return TL{a.view(-1)};
      });
  add(
      "input_mutation_output_view_multiple",
      [] {
        auto ar = [] {
          Tensor t = at::arange(4, at::TensorOptions().dtype(at::kFloat));
          t.requires_grad_(true);
          return t.view({2, 2}).add(1);
        };
        Tensor a = ar();
        Tensor b = ar();
        return TL{a, b, ones({2, 2}, true).add(1), ones({2, 2}, true).add(1)};
      },
      [](const TL& x) {
        Tensor a = x[0], b = x[1], c = x[2], d = x[3];
        b.transpose_(1, 0);
        c.add_(1);
        return TL{d + 1, b.diagonal(), a + c};
      });
  add(
      "input_returned_twice",
      [] {
        return TL{nonleaf({3, 3})};
      },
      [](const TL& x) {
        return TL{x[0], x[0]};
      });
  add(
      "input_detach_returned",
      [] {
        return TL{nonleaf({3, 3})};
      },
      [](const TL& x) {
        return TL{x[0].detach(), x[0] * 2};
      });
  add(
      "output_aliases_input_multi_output_view",
      [] {
        return TL{ones({3, 3}, true)};
      },
      [](const TL& x) { return x[0].unbind(0); });
  add(
      "output_aliases_input_multi_output_view_and_view",
      [] {
        return TL{nonleaf({3, 3})};
      },
      [](const TL& x) {
        const Tensor& a = x[0];
        return cat(a.unbind(0), {a.view(a.sizes())});
      });
  add(
      "output_aliases_input_chunk_no_grad",
      [] {
        return TL{ones({4, 2})};
      },
      [](const TL& x) { return x[0].chunk(2); });
  add(
      "view_detach",
      [] {
        return TL{nonleaf({3, 3})};
      },
      [](const TL& x) {
        Tensor a = x[0];
        Tensor tmp = a.detach();
        a.mul_(2);
        return TL{a, tmp};
      });

  // ============================ Outputs aliasing intermediates ============================
  add(
      "output_aliases_intermediate_single",
      [] {
        return TL{ones({3, 3}, true)};
      },
      [](const TL& x) {
        Tensor out = at::mul(x[0], 3);
        return TL{out.view(-1)};
      });
  add(
      "output_aliases_intermediate_single_no_grad",
      [] {
        return TL{ones({3, 3})};
      },
      [](const TL& x) {
        Tensor out = at::mul(x[0], 3);
        return TL{out.view(-1)};
      });
  add(
      "output_aliases_intermediate_multiple",
      [] {
        return TL{ones({3, 3}, true)};
      },
      [](const TL& x) {
        Tensor out = at::mul(x[0], 3);
        return TL{out.view(-1), out.view(-1)};
      });
  add(
      "output_aliases_intermediate_and_returned",
      [] {
        return TL{ones({3, 3}, true)};
      },
      [](const TL& x) {
        Tensor out = at::mul(x[0], 3);
        return TL{out.view(-1), out};
      });
  add(
      "output_aliases_intermediate_and_returned_flipped",
      [] {
        return TL{ones({3, 3}, true)};
      },
      [](const TL& x) {
        Tensor out = at::mul(x[0], 3);
        return TL{out, out.view(-1)};
      });
  add(
      "output_aliases_intermediate_and_returned_different_grad",
      [] {
        return TL{ones({3, 3}, true)};
      },
      [](const TL& x) {
        Tensor out = at::mul(x[0], 3);
        return TL{out.view(-1), out, out[0].detach()};
      });
  add(
      "output_aliases_intermediate_returned_multiple_times",
      [] {
        return TL{ones({3, 3}, true)};
      },
      [](const TL& x) {
        Tensor out = at::mul(x[0], 3);
        Tensor out_view = out.view(-1);
        return TL{out, out_view, out};
      });
  add(
      "output_aliases_intermediate_no_grad",
      [] {
        return TL{ones({3, 3}), ones({3, 3}, true)};
      },
      [](const TL& x) {
        Tensor out = at::mul(x[0], 3);
        return TL{out.view(-1), x[1].add(1)};
      });
  add(
      "output_aliases_intermediate_multiple_mixed",
      [] {
        return TL{ones({3, 3}, true)};
      },
      [](const TL& x) {
        Tensor out1 = at::mul(x[0], 3);
        Tensor out2 = at::mul(x[0], 4);
        return TL{out1.view(-1), out2.transpose(1, 0), out1.transpose(1, 0)};
      });
  add(
      "output_aliases_intermediate_inplace_view_with_detach",
      [] {
        return TL{ones({2, 4}, true)};
      },
      [](const TL& x) {
        Tensor out = at::mul(x[0], 3);
        out.t_();
        out.detach_();
        return TL{out, x[0] + 1};
      });
  add(
      "output_all_alias_types",
      [] {
        return TL{ones({1, 2, 4}, true).clone()};
      },
      [](const TL& x) {
        Tensor a = x[0];
        a.transpose_(1, 0);
        Tensor tmp = a.mul(2);
        return TL{tmp.squeeze(), tmp.transpose(1, 0), a.unsqueeze(0)};
      });
  add(
      "outputs_are_aliased", [] { return TL{ones({3}, true)}; },
      [](const TL& x) {
        Tensor b = x[0].mul(2);
        Tensor c2 = b.view(-1);
        return TL{b, c2};
      });
  add(
      "output_aliases_intermediate_multi_output_view",
      [] {
        return TL{ones({3, 3}, true)};
      },
      [](const TL& x) {
        Tensor out = at::mul(x[0], 3);
        return out.unbind(0);
      });
  add(
      "output_aliases_intermediate_multi_output_view_and_base",
      [] {
        return TL{ones({3, 3}, true)};
      },
      [](const TL& x) {
        Tensor out = at::mul(x[0], 3);
        return cat(out.unbind(0), {out});
      });
  add(
      "output_aliases_intermediate_multi_output_view_and_view",
      [] {
        return TL{ones({3, 3}, true)};
      },
      [](const TL& x) {
        Tensor out = at::mul(x[0], 3);
        return cat(out.unbind(0), {out.view(out.sizes())});
      });
  add(
      "output_aliases_intermediate_multi_output_view_base_and_view",
      [] {
        return TL{ones({3, 3}, true)};
      },
      [](const TL& x) {
        Tensor out = at::mul(x[0], 3);
        return cat(out.unbind(0), {out, out.view(out.sizes())});
      });
  add(
      "output_aliases_intermediate_split",
      [] {
        return TL{ones({4, 6}, true)};
      },
      [](const TL& x) {
        Tensor out = x[0] * 2;
        return out.split(2, /*dim=*/1);
      });
  add(
      "output_aliases_intermediate_split_and_view",
      [] {
        return TL{ones({4, 6}, true)};
      },
      [](const TL& x) {
        Tensor out = x[0] * 2;
        TL s = out.split(3, /*dim=*/1);
        return TL{s[0], s[1], out.view(-1), out.t()};
      });
  add(
      "output_and_detach",
      [] {
        return TL{ones({3, 3}, true)};
      },
      [](const TL& x) {
        Tensor out = x[0] * 2;
        return TL{out, out.detach()};
      });
  add(
      "intermediate_no_requires_grad_view",
      [] {
        return TL{ones({3, 3}, true), ones({3, 3})};
      },
      [](const TL& x) {
        Tensor out = x[1] * 2;
        return TL{x[0] * 2, out.view(-1), out.view(-1)};
      });
  add(
      "custom_function_view", [] { return TL{ones({4}, true)}; },
      [](const TL& x) { return TL{IdentityFn::apply(x[0])}; });

  // ============================ Hidden from autograd, no_grad, inference ============================
  add(
      "input_mutation_requires_grad_detach", [] { return TL{ones({4}, true)}; },
      [](const TL& x) {
        x[0].detach().mul_(2);
        return TL{x[0] + 3};
      });
  add(
      "input_mutation_requires_grad_detach_keep", [] { return TL{ones({4}, true)}; },
      [](const TL& x) {
        x[0].detach().mul_(2);
        return TL{x[0] + 3};
      },
      /*keep=*/true);
  add(
      "input_mutation_requires_grad_no_grad", [] { return TL{ones({4}, true)}; },
      [](const TL& x) {
        Tensor a = x[0];
        {
          at::NoGradGuard no_grad;
          a.mul_(2);
        }
        return TL{a + 3};
      },
      /*keep=*/true);
  add(
      "input_mutation_requires_grad_no_grad_no_keep", [] { return TL{ones({4}, true)}; },
      [](const TL& x) {
        Tensor a = x[0];
        {
          at::NoGradGuard no_grad;
          a.mul_(2);
        }
        return TL{a + 3};
      });
  add(
      "input_mutation_requires_grad_no_grad_inference_graph", [] { return TL{ones({4}, true)}; },
      [](const TL& x) {
        Tensor a = x[0];
        at::NoGradGuard no_grad;
        a.mul_(2);
        return TL{a + 3};
      },
      /*keep=*/true);
  add(
      "input_mutation_requires_grad_no_grad_detach_mixed", [] { return TL{nonleaf({4})}; },
      [](const TL& x) {
        Tensor a = x[0];
        a.detach().mul_(2);
        a.mul_(3);
        {
          at::NoGradGuard no_grad;
          a.mul_(4);
        }
        return TL{a + 5};
      },
      /*keep=*/true);
  add(
      "inference_mode_input_mutation",
      [] {
        return TL{nonleaf({3, 3})};
      },
      [](const TL& x) {
        Tensor a = x[0];
        a.mul_(2);
        return TL{a + 1, a.view(-1)};
      },
      /*keep=*/false, /*grad_enabled=*/false);
  add(
      "inference_keep_mutation_and_view",
      [] {
        return TL{ones({3, 3})};
      },
      [](const TL& x) {
        Tensor a = x[0];
        a.mul_(2);
        Tensor out = a * 3;
        return TL{out, out.view(-1)};
      },
      /*keep=*/true, /*grad_enabled=*/false);
  add(
      "input_inplace_requires_grad_true",
      [] {
        return TL{ones({3, 3}), ones({3, 3}, true)};
      },
      [](const TL& x) {
        Tensor a = x[0], b = x[1];
        a.requires_grad_(true);
        return TL{a.mul(3), b.mul(4)};
      });
  add(
      "grad_mode_mutation",
      [] {
        return TL{ones({3, 3}, true)};
      },
      [](const TL& x) {
        Tensor out = x[0] * 2;
        at::GradMode::set_enabled(false);
        return TL{out, x[0] + 1};
      });

  // ============================ Aliased and duplicated inputs ============================
  // base = ones(shape, requires_grad=rg); x = base.add(1); inputs x[i1], x[i2]
  auto two_views = [](int64_t i1, int64_t i2, std::vector<int64_t> shape, bool rg) {
    return [=] {
      Tensor base = ones(shape, rg);
      Tensor xx = base.add(1);
      return TL{xx[i1], xx[i2]};
    };
  };
  add("input_mutation_aliases_other_input", two_views(0, 0, {4, 2}, true), [](const TL& x) {
    Tensor a = x[0], b = x[1];
    a.add_(1);
    return TL{a + b};
  });
  add("input_data_and_metadata_mutation_aliases_other_input", two_views(0, 0, {2, 2}, true), [](const TL& x) {
    Tensor a = x[0], b = x[1];
    a.mul_(2);
    b.t_();
    return TL{a.mul(b)};
  });
  add(
      "input_mutation_false_aliasing",
      [] {
        Tensor base = ones({4, 4}, true);
        Tensor xx = base.add(1);
        return TL{xx.slice(0, 0, 2), xx.slice(0, 2, 4)};
      },
      [](const TL& x) {
        Tensor a = x[0], b = x[1];
        a.mul_(3);
        b.mul_(2);
        return TL{a.clone().view(-1) + b.clone().view(-1)};
      });
  add(
      "input_mutation_noncontiguous",
      [] {
        Tensor base = ones({2, 2}, true);
        Tensor xx = base.add(1);
        return TL{xx.select(1, 0)};
      },
      [](const TL& x) {
        Tensor a = x[0];
        a.mul_(2);
        return TL{a + 1};
      });
  add(
      "output_aliases_multiple_inputs_get_correct_one",
      [] {
        Tensor base = ones({2, 2}, true);
        Tensor xx = base.mul(2);
        return TL{xx.view(-1), xx[0]};
      },
      [](const TL& x) {
        return TL{x[0].view(x[0].sizes()), x[1].view(x[1].sizes())};
      });
  auto same_twice = [] {
    Tensor xx = nonleaf({3, 3});
    return TL{xx, xx};
  };
  add("duplicate_inputs_mutation", same_twice, [](const TL& x) {
    Tensor a = x[0], b = x[1];
    a.mul_(2);
    return TL{a + b};
  });
  add("duplicate_inputs_output_view", same_twice, [](const TL& x) { return TL{x[0].view(-1), x[1] * 2}; });
  add(
      "duplicate_inputs_no_grad_keep",
      [] {
        Tensor xx = ones({3, 3});
        return TL{xx, xx};
      },
      [](const TL& x) {
        Tensor a = x[0], b = x[1];
        b.add_(1);
        return TL{a * 2};
      },
      /*keep=*/true);

  // ============================ Storage mutation: set_() ============================
  auto set_input = [](const TL& x) {
    Tensor a = x[0];
    Tensor b = at::arange(9, at::TensorOptions().dtype(a.scalar_type())).reshape({3, 3});
    {
      at::NoGradGuard no_grad;
      a.set_(b);
    }
    return TL{a * b};
  };
  add(
      "set__input_mutation",
      [] {
        return TL{ones({3, 3}, true)};
      },
      set_input, /*keep=*/true);
  // PyTorch refuses a set_() it cannot keep in the graph: expected to throw.
  add(
      "set__input_mutation_no_keep",
      [] {
        return TL{ones({3, 3}, true)};
      },
      set_input);
  add(
      "set__nop",
      [] {
        return TL{ones({3, 3}, true)};
      },
      [](const TL& x) {
        Tensor a = x[0];
        Tensor b = at::arange(9, at::TensorOptions().dtype(a.scalar_type()));
        Tensor a_old = at::alias(a);
        {
          at::NoGradGuard no_grad;
          a.set_(b);
          a.set_(a_old);
        }
        return TL{a + b.reshape({3, 3})};
      });
  add(
      "set__and_data_mutation_good",
      [] {
        return TL{ones({3, 3}), ones({3, 3})};
      },
      [](const TL& x) {
        Tensor a = x[0], b = x[1];
        {
          at::NoGradGuard no_grad;
          a.set_(b);
        }
        b.mul_(2);
        return TL{a + b};
      },
      /*keep=*/true);

  // ============================ More edge cases ============================
  add(
      "channels_last_output_tangent",
      [] {
        Tensor a = at::ones({1, 3, 2, 2}).contiguous(at::MemoryFormat::ChannelsLast);
        a.requires_grad_(true);
        return TL{a};
      },
      [](const TL& x) {
        return TL{x[0] * 2, (x[0] * 3).sum(1)};
      });
  add(
      "float64_input_mutation_tangent",
      [] {
        Tensor a = at::ones({3, 3}, at::kDouble);
        a.requires_grad_(true);
        return TL{a.clone()};
      },
      [](const TL& x) {
        Tensor a = x[0];
        a.mul_(2);
        return TL{(a * 3).to(at::kFloat)};
      });
  add(
      "int_input_mutation_keep",
      [] {
        return TL{at::arange(6).view({2, 3})};
      },
      [](const TL& x) {
        Tensor a = x[0];
        a.add_(1);
        return TL{a * 2, a.view(-1)};
      },
      /*keep=*/true);
  add(
      "input_mutation_out_variant",
      [] {
        return TL{ones({3}), ones({3}), ones({3})};
      },
      [](const TL& x) {
        Tensor a = x[0];
        at::add_out(a, x[1], x[2]);
        return TL{a * 2};
      });
  add(
      "input_mutation_copy_from_other_input",
      [] {
        return TL{nonleaf({3, 3}), ones({3, 3}, true)};
      },
      [](const TL& x) {
        Tensor a = x[0];
        a.copy_(x[1]);
        return TL{a + 1};
      });
  add(
      "input_metadata_mutation_is_output",
      [] {
        return TL{nonleaf({2, 3})};
      },
      [](const TL& x) {
        Tensor a = x[0];
        a.unsqueeze_(0);
        return TL{a};
      });
  add(
      "input_mutation_through_returned_view",
      [] {
        return TL{nonleaf({3, 3})};
      },
      [](const TL& x) {
        Tensor v = x[0].view(-1);
        v.mul_(2);
        return TL{v};
      });
  add(
      "input_mutation_detached_no_grad_input_keep",
      [] {
        return TL{ones({3}), ones({3})};
      },
      [](const TL& x) {
        x[0].detach().mul_(2);
        return TL{x[0] + x[1]};
      },
      /*keep=*/true);
  add(
      "detach_view_and_view",
      [] {
        return TL{ones({3, 3}, true)};
      },
      [](const TL& x) {
        Tensor out = x[0] * 2;
        return TL{out.detach().view(-1), out.view(-1)};
      });
  add(
      "two_intermediate_bases",
      [] {
        return TL{ones({3, 3}, true)};
      },
      [](const TL& x) {
        Tensor out1 = x[0] * 2;
        Tensor out2 = x[0] * 3;
        return TL{out1.view(-1), out2.view(-1), out1.t(), out2[0]};
      });
  add(
      "intermediate_view_returned_twice",
      [] {
        return TL{ones({3, 3}, true)};
      },
      [](const TL& x) {
        Tensor v = (x[0] * 2).view(-1);
        return TL{v, v};
      });
  add(
      "view_of_view_of_intermediate",
      [] {
        return TL{ones({3, 3}, true)};
      },
      [](const TL& x) {
        Tensor out = x[0] * 2;
        return TL{out.view(-1).view({3, 3}), out.t()[0], out.diagonal()};
      });
  add(
      "intermediate_mutated_after_view",
      [] {
        return TL{ones({3, 3}, true)};
      },
      [](const TL& x) {
        Tensor out = x[0] * 2;
        Tensor v = out.view(-1);
        out.mul_(2);
        return TL{v, out};
      });
  add(
      "view_then_inplace_makes_base_require_grad",
      [] {
        return TL{ones({3, 3}, true), ones({3, 3})};
      },
      [](const TL& x) {
        Tensor out = x[1] * 2;
        Tensor v = out.view(-1);
        out.mul_(x[0]);
        return TL{v};
      });
  add(
      "intermediate_made_under_no_grad",
      [] {
        return TL{ones({3, 3}, true)};
      },
      [](const TL& x) {
        Tensor out;
        {
          at::NoGradGuard no_grad;
          out = x[0] * 2;
        }
        return TL{out.view(-1), x[0] * 2};
      });
  add(
      "reshape_view_and_copy",
      [] {
        return TL{ones({2, 3}, true)};
      },
      [](const TL& x) {
        const Tensor& a = x[0];
        Tensor out = a * 2;
        return TL{a.reshape(-1), out.t().reshape(-1), a.as_strided({2}, {1}), a.expand({2, 2, 3})};
      });
  add(
      "custom_function_clone", [] { return TL{ones({4}, true)}; },
      [](const TL& x) { return TL{CloneFn::apply(x[0])}; });
  add(
      "grad_mode_mutation_enable",
      [] {
        return TL{ones({3, 3}, true)};
      },
      [](const TL& x) {
        at::GradMode::set_enabled(true);
        return TL{x[0] * 2};
      },
      /*keep=*/false, /*grad_enabled=*/false);
  add(
      "set__then_return_input",
      [] {
        return TL{ones({3, 3}, true), ones({3, 3})};
      },
      [](const TL& x) {
        Tensor a = x[0];
        {
          at::NoGradGuard no_grad;
          a.set_(x[1]);
        }
        return TL{a, a.view(-1)};
      },
      /*keep=*/true);
  add(
      "set__to_intermediate_then_return_input",
      [] {
        return TL{ones({3, 3}, true)};
      },
      [](const TL& x) {
        Tensor a = x[0];
        Tensor b = at::arange(9, at::TensorOptions().dtype(a.scalar_type())).reshape({3, 3});
        {
          at::NoGradGuard no_grad;
          a.set_(b);
        }
        return TL{a, b};
      },
      /*keep=*/true);
  add(
      "set__other_input_then_view_of_source",
      [] {
        return TL{ones({3, 3}), ones({3, 3})};
      },
      [](const TL& x) {
        Tensor a = x[0], b = x[1];
        {
          at::NoGradGuard no_grad;
          b.set_(a);
        }
        return TL{a.view(-1), b * 2};
      },
      /*keep=*/true);
  add(
      "scalar_output_tangent",
      [] {
        return TL{ones({3, 3}, true)};
      },
      [](const TL& x) {
        return TL{x[0].sum(), (x[0] * 2).mean(0)};
      });
  add(
      "input_detach_inplace",
      [] {
        return TL{nonleaf({3, 3})};
      },
      [](const TL& x) {
        Tensor a = x[0];
        a.detach_();
        return TL{a * 2};
      });
  add(
      "input_resize_same_numel",
      [] {
        return TL{ones({3, 3})};
      },
      [](const TL& x) {
        Tensor a = x[0];
        a.resize_({9});
        return TL{a * 2};
      });
  add(
      "input_mutation_squeeze_and_swapdims_",
      [] {
        return TL{nonleaf({1, 2, 3})};
      },
      [](const TL& x) {
        Tensor a = x[0];
        a.squeeze_(0);
        a.swapdims_(0, 1);
        return TL{a + 1};
      });
  add(
      "alias_op_of_input",
      [] {
        return TL{nonleaf({3, 3})};
      },
      [](const TL& x) {
        return TL{at::alias(x[0]), x[0].flatten()};
      });
  add(
      "views_of_no_grad_base_mutated",
      [] {
        Tensor base = at::ones({4, 4});
        return TL{base[1], base.select(1, 1)};
      },
      [](const TL& x) {
        Tensor a = x[0], b = x[1];
        a.fill_(2);
        b.zero_();
        return TL{a + b};
      });
  return c;
}

}  // namespace

const std::vector<MetadataCase>& metadata_corpus() {
  static const std::vector<MetadataCase> corpus = build();
  return corpus;
}

const MetadataCase* find_metadata_case(const std::string& name) {
  for (const auto& c : metadata_corpus())
    if (c.name == name) return &c;
  return nullptr;
}

}  // namespace aotpipe::testing
