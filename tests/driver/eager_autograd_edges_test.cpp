// What a compiled function's results do after the call, as eager's would: in-place ops on its
// outputs, which autograd history a backward walks, version counters of mutated inputs, and
// inference tensors. Each case is one of PyTorch's runtime-wrapper Notes; eager PyTorch is the
// oracle (eager_check compares values, not these).
#include <aotpipe/driver/aot_function.h>

#include <ATen/ATen.h>
#include <ATen/autocast_mode.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <functional>
#include <string>

namespace aotpipe {
namespace {

at::Tensor param(std::vector<int64_t> sizes) { return torch::randn(sizes).requires_grad_(true); }

const char* mode(bool compiled) { return compiled ? "compiled" : "eager"; }

// What `body` raises ("" if nothing), with `fn` as the function under test.
std::string error_of(const std::function<void()>& body) {
  try {
    body();
  } catch (const std::exception& e) { return std::string(e.what()).substr(0, std::string(e.what()).find('\n')); }
  return "";
}

// Note [Intermediate Bases Optimization]: a view of an intermediate returned alone is returned
// as an _unsafe_view, not as a view made inside the compiled autograd function, so an in-place
// op on it works as in eager.
TEST(EagerAutogradEdges, AViewOfAnIntermediateTakesInPlaceOps) {
  auto fn = [](const TensorList& a) { return TensorList{(a[0] * 2).view(-1)}; };
  CompiledFunction f = aot_function(fn);
  for (const bool compiled : {false, true}) {
    at::Tensor x = param({2, 2});
    at::Tensor out = compiled ? f({x})[0] : fn({x})[0];
    ASSERT_EQ(error_of([&] {
                out.mul_(3);
                out.sum().backward();
              }),
              "")
        << mode(compiled);
    EXPECT_TRUE(at::allclose(x.grad(), at::full({2, 2}, 6.0))) << mode(compiled);
  }
}

// Note [Detaching inputs that never need gradients]: a non-leaf input that gets no gradient is
// detached before the compiled function, so a backward never walks its history (which may have
// been freed by an earlier backward, and whose hooks must not run).
TEST(EagerAutogradEdges, ABackwardDoesNotWalkTheHistoryOfAnInputThatGetsNoGradient) {
  auto fn = [](const TensorList& a) { return TensorList{a[0] * a[1].detach()}; };
  CompiledFunction f = aot_function(fn);
  for (const bool compiled : {false, true}) {
    at::Tensor x = param({3}), w = param({3});
    at::Tensor y = w.exp();
    int hooks = 0;
    y.register_hook([&](const at::Tensor&) { ++hooks; });
    y.sum().backward();  // frees y's history
    ASSERT_EQ(hooks, 1);
    at::Tensor out = compiled ? f({x, y})[0] : fn({x, y})[0];
    EXPECT_EQ(error_of([&] { out.sum().backward(); }), "") << mode(compiled);
    EXPECT_TRUE(at::allclose(x.grad(), y.detach())) << mode(compiled);
    EXPECT_EQ(hooks, 1) << mode(compiled);
  }
}

// A metadata-only mutation of an input bumps its version counter as eager's t_() does: a graph
// outside the function that saved the input refuses its backward instead of using the input's
// new shape. An inference compile and a training one (an input requires grad).
TEST(EagerAutogradEdges, AMetadataMutationInvalidatesWhatOtherGraphsSaved) {
  auto inference = [](const TensorList& a) {
    a[0].t_();
    return TensorList{a[0] + 1};
  };
  auto training = [](const TensorList& a) {
    a[0].t_();
    return TensorList{a[0] * a[1]};
  };
  for (const auto& [name, fn] :
       {std::pair{"inference", Function(inference)}, std::pair{"training", Function(training)}}) {
    CompiledFunction f = aot_function(fn);
    for (const bool compiled : {false, true}) {
      at::Tensor x = torch::randn({3, 3}), w = param({3, 3});
      at::Tensor y = w * x;
      const int64_t version = x._version();
      at::Tensor out = (compiled ? f({x, param({3, 3})}) : fn({x, param({3, 3})}))[0];
      EXPECT_EQ(x._version(), version + 1) << name << " " << mode(compiled);
      EXPECT_THAT(error_of([&] { y.sum().backward(); }), ::testing::HasSubstr("modified by an inplace operation"))
          << name << " " << mode(compiled);
      if (out.requires_grad())  // the function's own backward is unaffected
        EXPECT_EQ(error_of([&] { out.sum().backward(); }), "") << name << " " << mode(compiled);
      EXPECT_EQ(out.requires_grad(), std::string(name) == "training");
    }
  }
}

// ... and the function's own backward works where eager's does: what it saved of the input after
// the mutation is read at the version the mutation left; what eager saved before it and the
// mutation then changed is refused, by both.
TEST(EagerAutogradEdges, AMetadataMutatedInputsSavedValuesAreCheckedAsInEager) {
  auto saves_after = [](const TensorList& a) {
    a[0].t_();
    return TensorList{a[0] * a[1]};
  };
  auto saves_before = [](const TensorList& a) {
    at::Tensor y = a[0] * a[1];
    a[0].t_();
    return TensorList{y};
  };
  CompiledFunction after = aot_function(saves_after), before = aot_function(saves_before);
  for (const bool compiled : {false, true}) {
    at::Tensor x = torch::randn({3, 3}), w = param({3, 3});
    const at::Tensor x_before = x.clone();
    ASSERT_EQ(error_of([&] {
                (compiled ? after({x, w}) : saves_after({x, w}))[0].sum().backward();
              }),
              "")
        << mode(compiled);
    EXPECT_TRUE(at::allclose(w.grad(), x_before.t())) << mode(compiled);
    EXPECT_TRUE(at::equal(x, x_before.t())) << mode(compiled);
    at::Tensor x2 = torch::randn({3, 3}), w2 = param({3, 3});
    EXPECT_THAT(error_of([&] {
                  (compiled ? before({x2, w2}) : saves_before({x2, w2}))[0].sum().backward();
                }),
                ::testing::HasSubstr("modified by an inplace operation"))
        << mode(compiled);
  }
}

// A non-leaf input mutated under no_grad keeps its history, as in eager: the epilogue's copy is
// not recorded by autograd.
TEST(EagerAutogradEdges, AMutationUnderNoGradLeavesTheInputsHistory) {
  auto fn = [](const TensorList& a) {
    {
      at::NoGradGuard no_grad;
      a[0].mul_(2);
    }
    return TensorList{a[0].view(-1)};
  };
  CompiledFunction f = aot_function(fn);
  for (const bool compiled : {false, true}) {
    at::Tensor leaf = param({4});
    at::Tensor x = leaf.clone();
    at::Tensor out = compiled ? f({x})[0] : fn({x})[0];
    out.sum().backward();
    EXPECT_TRUE(at::allclose(leaf.grad(), at::ones({4}))) << mode(compiled);
    EXPECT_TRUE(at::allclose(x.detach(), leaf.detach() * 2)) << mode(compiled);
  }
}

// Inference tensors have no version counter: a metadata mutation of one under InferenceMode
// works as in eager.
TEST(EagerAutogradEdges, AMetadataMutationOfAnInferenceTensor) {
  auto fn = [](const TensorList& a) {
    a[0].t_();
    return TensorList{a[0] + 1};
  };
  CompiledFunction f = aot_function(fn);
  c10::InferenceMode inference;
  at::Tensor x = at::arange(6, at::kFloat).view({2, 3});
  const at::Tensor expected = x.t() + 1;
  TensorList out;
  ASSERT_EQ(error_of([&] { out = f({x}); }), "");
  EXPECT_TRUE(at::equal(out[0], expected));
  EXPECT_EQ(x.sizes(), (std::vector<int64_t>{3, 2}));
}

// A trace under autocast records its casts: a function compiled under autocast and called
// without it (or the other way round) compiles again for that state, as torch.compile guards on
// it, and gives eager's dtypes and gradients in both.
TEST(EagerAutogradEdges, AutocastOnOrOffCompilesForEach) {
  auto fn = [](const TensorList& a) { return TensorList{at::mm(a[0], a[1]).relu()}; };
  for (const bool first_with_autocast : {true, false}) {
    CompiledFunction f = aot_function(fn);
    for (const bool autocast : {first_with_autocast, !first_with_autocast}) {
      at::autocast::set_autocast_enabled(at::kCPU, autocast);
      at::Tensor x = torch::randn({4, 8}), w = param({8, 4});
      at::Tensor we = w.detach().clone().requires_grad_(true);
      at::Tensor compiled = f({x, w})[0], eager = fn({x, we})[0];
      at::autocast::set_autocast_enabled(at::kCPU, false);
      const std::string when = first_with_autocast ? (autocast ? "first, with" : "then without")
                                                   : (autocast ? "then with" : "first, without");
      EXPECT_EQ(compiled.scalar_type(), autocast ? at::kBFloat16 : at::kFloat) << when;
      EXPECT_EQ(compiled.scalar_type(), eager.scalar_type()) << when;
      EXPECT_TRUE(at::allclose(compiled.to(at::kFloat), eager.to(at::kFloat))) << when;
      compiled.sum().backward();
      eager.sum().backward();
      EXPECT_TRUE(at::allclose(w.grad(), we.grad())) << when;
    }
    EXPECT_EQ(f.num_compiled(), 2u);
  }
}

}  // namespace
}  // namespace aotpipe
