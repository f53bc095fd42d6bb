#include "partition_cases.h"

#include <ATen/ATen.h>

#include <stdexcept>

// The functions are written so that C++ records their ops in the order Python evaluates them
// (C++ leaves the order of an operator's operands unspecified: `f(a) + g(b)` may run g first).
// The min-cut heuristics look at node order (ban_recompute_used_far_apart compares positions), so
// a different but equally valid order can change what is saved, in PyTorch as here.
namespace aotpipe::testing {
namespace {

at::Tensor randn(std::vector<int64_t> sizes, at::Generator& gen, bool requires_grad = true) {
  at::Tensor t = at::randn(sizes, gen);
  if (requires_grad) t.requires_grad_(true);
  return t;
}

std::vector<PartitionCase> make_cases() {
  std::vector<PartitionCase> cases;
  auto add = [&](std::string name, TraceFunction fn, std::function<TensorList(at::Generator&)> inputs) {
    cases.push_back({std::move(name), std::move(fn), [inputs = std::move(inputs)] {
                       at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(1234);
                       return inputs(gen);
                     }});
  };
  add(
      "mlp", [](const TensorList& a) { return TensorList{at::mm(at::relu(at::mm(a[0], a[1]) + a[2]), a[3])}; },
      [](at::Generator& g) {
        return TensorList{randn({8, 16}, g), randn({16, 32}, g), randn({32}, g), randn({32, 4}, g)};
      });
  // test_aotdispatch.py test_min_cut_partitioner: min-cut saves only the input.
  add(
      "cos3", [](const TensorList& a) { return TensorList{a[0].cos().cos().cos()}; },
      [](at::Generator& g) { return TensorList{randn({3}, g)}; });
  // test_min_cut_partitioner_recomputable_ops.
  add(
      "mul3", [](const TensorList& a) { return TensorList{a[0] * a[0] * a[0]}; },
      [](at::Generator& g) { return TensorList{randn({3}, g)}; });
  // test_min_cut_partitioner: (4 inputs) -> saves one value.
  add(
      "add4_cos2", [](const TensorList& a) { return TensorList{(a[0] + a[1] + a[2] + a[3]).cos().cos()}; },
      [](at::Generator& g) {
        return TensorList{randn({3}, g), randn({3}, g), randn({3}, g), randn({3}, g)};
      });
  // test_min_cut_partitioner: mm is saved, the tanh chain recomputed.
  add(
      "mm_tanh",
      [](const TensorList& a) {
        return TensorList{at::mm(a[0], at::ones(a[0].sizes(), a[0].options().requires_grad(false))).tanh().tanh()};
      },
      [](at::Generator& g) {
        return TensorList{randn({5, 5}, g)};
      });
  add(
      "softmax", [](const TensorList& a) { return TensorList{at::softmax(a[0], -1)}; },
      [](at::Generator& g) {
        return TensorList{randn({4, 8}, g)};
      });
  add(
      "layer_norm_ish",
      [](const TensorList& a) {
        at::Tensor m = a[0].mean({-1}, true);
        at::Tensor v = (a[0] - m).pow(2).mean({-1}, true);
        at::Tensor centered = a[0] - m;  // before the sqrt, as Python evaluates it
        return TensorList{centered / at::sqrt(v + 1e-5) * a[1] + a[2]};
      },
      [](at::Generator& g) {
        return TensorList{randn({4, 8}, g), randn({8}, g), randn({8}, g)};
      });
  add(
      "layer_norm", [](const TensorList& a) { return TensorList{at::layer_norm(a[0], {8}, a[1], a[2], 1e-5)}; },
      [](at::Generator& g) {
        return TensorList{randn({4, 8}, g), randn({8}, g), randn({8}, g)};
      });
  add(
      "conv_relu",
      [](const TensorList& a) {
        return TensorList{at::convolution(a[0], a[1], a[2], {1, 1}, {1, 1}, {1, 1}, false, {0, 0}, 1).relu()};
      },
      [](at::Generator& g) {
        return TensorList{randn({2, 3, 8, 8}, g), randn({4, 3, 3, 3}, g), randn({4}, g)};
      });
  add(
      "sum_dim", [](const TensorList& a) { return TensorList{a[0].sum(1)}; },
      [](at::Generator& g) {
        return TensorList{randn({10, 10}, g)};
      });
  // A residual chain of matmuls and gelus: several cut candidates per layer.
  add(
      "gelu_chain",
      [](const TensorList& a) {
        at::Tensor x = a[0];
        for (int i = 0; i < 3; ++i) x = at::gelu(at::mm(x, a[1])) * 0.5 + x;
        return TensorList{x};
      },
      [](at::Generator& g) {
        return TensorList{randn({16, 32}, g), randn({32, 32}, g)};
      });
  // Only the first input requires grad; two outputs, one of them not differentiable.
  add(
      "partial_grad",
      [](const TensorList& a) {
        at::Tensor y = (a[0] * a[1]).sin();
        return TensorList{y.exp(), a[1].cos()};
      },
      [](at::Generator& g) {
        return TensorList{randn({6}, g), randn({6}, g, false)};
      });
  // A random op: never recomputed (its mask or result is saved).
  add(
      "dropout_mul",
      [](const TensorList& a) {
        auto [out, mask] = at::native_dropout(a[0], 0.5, true);
        return TensorList{out * a[0]};
      },
      [](at::Generator& g) { return TensorList{randn({16}, g)}; });
  cases.back().random = true;
  // 300 pointwise ops in a row: ban_recompute_long_fusible_chains cuts them every ~100.
  add(
      "sin_chain",
      [](const TensorList& a) {
        at::Tensor x = a[0];
        for (int i = 0; i < 300; ++i) x = x.sin();
        return TensorList{x};
      },
      [](at::Generator& g) { return TensorList{randn({8}, g)}; });
  // The benchmark's ladder, 40 layers (~700 nodes): pointwise ops and matmuls on a residual stream.
  add(
      "ladder",
      [](const TensorList& a) {
        at::Tensor h = a[0];
        for (int i = 0; i < 40; ++i) {
          at::Tensor t = at::tanh(at::mm(h, a[1]));  // in Python's evaluation order (see below)
          h = t + h.sin() * h;
        }
        return TensorList{h};
      },
      [](at::Generator& g) {
        return TensorList{randn({16, 16}, g), randn({16, 16}, g)};
      });
  // A tensor the function closes over: a graph constant, needed by the backward.
  add(
      "closure_constant",
      [c = at::linspace(0.5, 2.0, 6).reshape({2, 3})](const TensorList& a) { return TensorList{(a[0] * c).sin()}; },
      [](at::Generator& g) {
        return TensorList{randn({2, 3}, g)};
      });
  cases.back().no_oracle_reason =
      "aot_function's FakeTensorMode refuses a closed-over real tensor (\"Please convert all Tensors to "
      "FakeTensors\"); "
      "PyTorch has no aot_function counterpart of a graph constant";
  // Outputs that are views of the input and of an intermediate.
  add(
      "view_outputs",
      [](const TensorList& a) {
        at::Tensor y = a[0].exp();
        return TensorList{a[0].t(), y.view({-1}), y.sum()};
      },
      [](at::Generator& g) {
        return TensorList{randn({3, 4}, g)};
      });
  return cases;
}

}  // namespace

const std::vector<PartitionCase>& partition_cases() {
  static const std::vector<PartitionCase> cases = make_cases();
  return cases;
}

const PartitionCase& partition_case(const std::string& name) {
  for (const auto& c : partition_cases())
    if (c.name == name) return c;
  throw std::out_of_range("no partition case " + name);
}

}  // namespace aotpipe::testing
