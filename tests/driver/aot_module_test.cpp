// aot_module end to end against eager PyTorch: an eager module and a compiled copy with the same
// state take the same inputs for several training steps (SGD between them); outputs, parameter
// gradients, input gradients, inputs after the call and buffers (BatchNorm running statistics,
// num_batches_tracked) must match after every step. Also: the cache key (training mode), the
// module-use guard, swapping and restoring the module's tensors, refusals, concurrent compiles.
#include <aotpipe/pipeline/errors.h>
#include <aotpipe/driver/aot_module.h>
#include <aotpipe/stages/partition/default_partition.h>
#include <aotpipe/stages/partition/min_cut_partition.h>

#include "../runtime/test_modules.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <atomic>
#include <chrono>
#include <thread>

namespace aotpipe {
namespace {

using testing::ConvBn;
using testing::ConvBnImpl;
using testing::LinearWithSteps;
using testing::LinearWithStepsImpl;
using testing::Mlp;
using testing::MlpImpl;

constexpr double kRtol = 1e-4;
constexpr double kAtol = 1e-5;

struct ModuleCase {
  std::string name;
  std::function<std::shared_ptr<torch::nn::Module>()> make;
  ModuleForward forward;
  std::function<TensorList()> make_inputs;
};

std::shared_ptr<torch::nn::Module> sequential_with_batchnorm() {
  return torch::nn::Sequential(torch::nn::Linear(5, 7), torch::nn::BatchNorm1d(7), torch::nn::ReLU(),
                               torch::nn::Linear(7, 2))
      .ptr();
}

std::vector<ModuleCase> module_cases() {
  std::vector<ModuleCase> c;
  c.push_back(
      {"mlp", [] { return Mlp(6, 8, 4).ptr(); },
       [](torch::nn::Module& m, const TensorList& a) { return TensorList{dynamic_cast<MlpImpl&>(m).forward(a[0])}; },
       [] {
         return TensorList{torch::randn({5, 6}).requires_grad_()};
       }});
  c.push_back({"conv_bn_train", [] { return ConvBn().ptr(); },
               [](torch::nn::Module& m, const TensorList& a) {
                 return TensorList{dynamic_cast<ConvBnImpl&>(m).forward(a[0]).relu()};
               },
               [] {
                 return TensorList{torch::randn({2, 2, 5, 5})};
               }});
  c.push_back({"sequential_batchnorm1d", sequential_with_batchnorm,
               [](torch::nn::Module& m, const TensorList& a) {
                 return TensorList{dynamic_cast<torch::nn::SequentialImpl&>(m).forward(a[0])};
               },
               [] {
                 return TensorList{torch::randn({6, 5})};
               }});
  // A module of our own (declared members), a buffer counter and a mutated user input.
  c.push_back({"own_module_buffer_and_input_mutation", [] { return LinearWithSteps().ptr(); },
               [](torch::nn::Module& mod, const TensorList& a) {
                 auto& m = dynamic_cast<LinearWithStepsImpl&>(mod);
                 m.steps.add_(1);
                 a[1].mul_(2);
                 return TensorList{m.fc(a[0]) * m.scale * a[1] + m.steps, a[1] * 3};
               },
               [] {
                 return TensorList{torch::randn({2, 4}).requires_grad_(), torch::randn({3})};
               }});
  return c;
}

// Fresh copies of `inputs` with the same values and requires_grad, so eager and compiled calls
// (which may mutate them) start from equal tensors.
TensorList copy_inputs(const TensorList& inputs) {
  TensorList copies;
  for (const at::Tensor& t : inputs) copies.push_back(t.detach().clone().requires_grad_(t.requires_grad()));
  return copies;
}

void expect_close(const at::Tensor& actual, const at::Tensor& expected, const std::string& what) {
  ASSERT_EQ(actual.defined(), expected.defined()) << what;
  if (!expected.defined()) return;
  ASSERT_EQ(actual.sizes(), expected.sizes()) << what;
  ASSERT_EQ(actual.scalar_type(), expected.scalar_type()) << what;
  EXPECT_TRUE(at::allclose(actual.detach(), expected.detach(), kRtol, kAtol)) << what << "\nactual:\n"
                                                                              << actual << "\nexpected:\n"
                                                                              << expected;
}

// Every parameter's value and gradient and every buffer of `actual` equal `expected`'s.
void expect_same_state(const torch::nn::Module& actual, const torch::nn::Module& expected, const std::string& label) {
  const auto expected_params = expected.named_parameters();
  for (const auto& p : actual.named_parameters()) {
    expect_close(p.value(), expected_params[p.key()], label + ": parameter " + p.key());
    expect_close(p.value().grad(), expected_params[p.key()].grad(), label + ": gradient of " + p.key());
  }
  const auto expected_buffers = expected.named_buffers();
  for (const auto& b : actual.named_buffers())
    expect_close(b.value(), expected_buffers[b.key()], label + ": buffer " + b.key());
}

// Runs `steps` training steps eagerly and through aot_module; checks everything after each.
void expect_training_matches_eager(const ModuleCase& c, const AotConfig& config, int steps = 3) {
  torch::manual_seed(0);
  auto eager = c.make();
  auto compiled_module = c.make();
  testing::copy_module_state(*eager, *compiled_module);
  CompiledModule compiled = aot_module(compiled_module, c.forward, config);
  torch::optim::SGD eager_opt(eager->parameters(), 0.1);
  torch::optim::SGD compiled_opt(compiled_module->parameters(), 0.1);
  for (int step = 0; step < steps; ++step) {
    const std::string label = c.name + " step " + std::to_string(step);
    const TensorList inputs = c.make_inputs();
    TensorList eager_in = copy_inputs(inputs);
    TensorList compiled_in = copy_inputs(inputs);
    TensorList expected = c.forward(*eager, eager_in);
    TensorList actual = compiled(compiled_in);
    ASSERT_EQ(actual.size(), expected.size()) << label;
    at::Tensor eager_loss = at::zeros({}), compiled_loss = at::zeros({});
    for (std::size_t k = 0; k < expected.size(); ++k) {
      expect_close(actual[k], expected[k], label + ": output " + std::to_string(k));
      EXPECT_EQ(actual[k].requires_grad(), expected[k].requires_grad()) << label << ": output " << k;
      if (!expected[k].requires_grad()) continue;
      const at::Tensor weight = torch::randn(expected[k].sizes());  // the same weights for both
      eager_loss = eager_loss + (expected[k] * weight).sum();
      compiled_loss = compiled_loss + (actual[k] * weight).sum();
    }
    ASSERT_TRUE(eager_loss.requires_grad()) << label << ": nothing to differentiate";
    eager_loss.backward();
    compiled_loss.backward();
    for (std::size_t i = 0; i < inputs.size(); ++i) {
      expect_close(compiled_in[i], eager_in[i], label + ": input " + std::to_string(i) + " after the call");
      expect_close(compiled_in[i].grad(), eager_in[i].grad(), label + ": gradient of input " + std::to_string(i));
    }
    expect_same_state(*compiled_module, *eager, label);
    eager_opt.step();
    compiled_opt.step();
    eager_opt.zero_grad();
    compiled_opt.zero_grad();
  }
  expect_same_state(*compiled_module, *eager, c.name + " after the last step");
  // New parameter values are read at every call: the optimizer steps did not recompile.
  EXPECT_EQ(compiled.num_compiled(), 1u) << c.name;
}

// Each module under both partitioners (the min-cut one may recompute forward ops in the backward).
class AotModuleTraining : public ::testing::TestWithParam<std::tuple<ModuleCase, bool>> {};

TEST_P(AotModuleTraining, MatchesEagerOverOptimizerSteps) {
  const auto& [c, min_cut] = GetParam();
  AotConfig config;
  config.partition_fn =
      min_cut ? partitioners::min_cut_rematerialization_partition() : partitioners::default_partition();
  expect_training_matches_eager(c, config);
}

INSTANTIATE_TEST_SUITE_P(Modules, AotModuleTraining,
                         ::testing::Combine(::testing::ValuesIn(module_cases()), ::testing::Bool()),
                         [](const auto& info) {
                           return std::get<0>(info.param).name + (std::get<1>(info.param) ? "_min_cut" : "_default");
                         });

ModuleCase conv_bn_case() { return module_cases()[1]; }

TEST(AotModule, EvalModeIsPartOfTheCacheKey) {
  const ModuleCase c = conv_bn_case();
  auto eager = c.make();
  auto module = c.make();
  testing::copy_module_state(*eager, *module);
  CompiledModule compiled = aot_module(module, c.forward);
  const at::Tensor x = torch::randn({2, 2, 5, 5});
  compiled({x.clone()});
  c.forward(*eager, {x.clone()});
  EXPECT_EQ(compiled.num_compiled(), 1u);

  const std::string train_key = module_signature(*module);
  module->eval();
  eager->eval();
  EXPECT_NE(module_signature(*module), train_key);
  const TensorList actual = compiled({x.clone()});
  const TensorList expected = c.forward(*eager, {x.clone()});
  EXPECT_EQ(compiled.num_compiled(), 2u) << "switching to eval() must compile again";
  expect_close(actual[0], expected[0], "eval output");
  expect_same_state(*module, *eager, "eval: running statistics untouched");

  // A submodule's mode alone is part of the key too.
  module->train();
  dynamic_cast<ConvBnImpl&>(*module).bn->eval();
  EXPECT_NE(module_signature(*module), train_key);

  module->train();
  eager->train();
  EXPECT_EQ(module_signature(*module), train_key);
  expect_close(compiled({x.clone()})[0], c.forward(*eager, {x.clone()})[0], "train again");
  EXPECT_EQ(compiled.num_compiled(), 2u) << "back in training mode the first compile serves";
  expect_same_state(*module, *eager, "train again");
}

TEST(AotModule, InferenceUnderNoGradStillUpdatesRunningStatistics) {
  const ModuleCase c = conv_bn_case();
  auto eager = c.make();
  auto module = c.make();
  testing::copy_module_state(*eager, *module);
  CompiledModule compiled = aot_module(module, c.forward);
  torch::NoGradGuard no_grad;
  for (int step = 0; step < 2; ++step) {
    const at::Tensor x = torch::randn({2, 2, 5, 5});
    expect_close(compiled({x})[0], c.forward(*eager, {x})[0], "no_grad output");
    expect_same_state(*module, *eager, "no_grad step " + std::to_string(step));
  }
  EXPECT_FALSE(compiled.compiled_state({torch::randn({2, 2, 5, 5})})->function.needs_autograd);
  auto& bn = dynamic_cast<ConvBnImpl&>(*module).bn;
  EXPECT_EQ(bn->num_batches_tracked.item<int64_t>(), 2);
}

TEST(AotModule, SeesParameterValuesChangedBetweenCalls) {
  auto module = Mlp(3, 4, 2);
  CompiledModule compiled = aot_module(module.ptr(), module_cases()[0].forward);
  const at::Tensor x = torch::randn({2, 3});
  compiled({x});
  {
    torch::NoGradGuard no_grad;
    module->fc2->bias.fill_(5);
    module->fc2->weight.zero_();
  }
  expect_close(compiled({x})[0], torch::full({2, 2}, 5.0), "after zeroing fc2.weight");
  EXPECT_EQ(compiled.num_compiled(), 1u);
}

TEST(AotModule, ModuleTensorsAreTheLeadingInputs) {
  auto module = LinearWithSteps();
  CompiledModule compiled = aot_module(module.ptr(), module_cases()[3].forward);
  auto state = compiled.compiled_state({torch::randn({2, 4}), torch::randn({3})});
  EXPECT_EQ(state->config.num_params_buffers, 4u);
  ASSERT_EQ(state->function.args.size(), 6u);
  // named_parameters() then named_buffers(): scale (own), fc.weight, fc.bias, steps.
  EXPECT_TRUE(state->function.args[0].is_same(module->scale));
  EXPECT_TRUE(state->function.args[1].is_same(module->fc->weight));
  EXPECT_TRUE(state->function.args[2].is_same(module->fc->bias));
  EXPECT_TRUE(state->function.args[3].is_same(module->steps));
}

// ---- swapping and restoring ------------------------------------------------------------------

struct UndeclaredImpl : torch::nn::Module {
  UndeclaredImpl() { w = register_parameter("w", torch::ones({3})); }
  at::Tensor w;
};

// Declared with no members although its forward reads one: the member keeps the real tensor.
struct MisdeclaredImpl : torch::nn::Module {
  MisdeclaredImpl() { w = register_parameter("w", torch::ones({3})); }
  at::Tensor w;
};

TEST(AotModule, RefusesAModuleTypeWhoseMembersAreUnknown) {
  auto module = std::make_shared<UndeclaredImpl>();
  const at::Tensor original = module->w;
  CompiledModule compiled = aot_module(module, [](torch::nn::Module& m, const TensorList& a) {
    return TensorList{a[0] * dynamic_cast<UndeclaredImpl&>(m).w};
  });
  // Compile errors reach the caller as the pipeline's StageError, naming the stage.
  EXPECT_THAT([&] { compiled({torch::randn({3})}); },
              ::testing::ThrowsMessage<StageError>(::testing::AllOf(::testing::HasSubstr("UndeclaredImpl"),
                                                                    ::testing::HasSubstr("register_tensor_members"))));
  EXPECT_TRUE(module->w.is_same(original));
  EXPECT_TRUE(module->named_parameters()["w"].is_same(original));
}

TEST(AotModule, RefusesAGraphThatReadsAModuleTensorAsAConstant) {
  register_tensor_members<MisdeclaredImpl>({});
  auto module = std::make_shared<MisdeclaredImpl>();
  CompiledModule compiled = aot_module(module, [](torch::nn::Module& m, const TensorList& a) {
    return TensorList{a[0] * dynamic_cast<MisdeclaredImpl&>(m).w};
  });
  EXPECT_THAT([&] { compiled({torch::randn({3}).requires_grad_()}); },
              ::testing::ThrowsMessage<StageError>(
                  ::testing::AllOf(::testing::HasSubstr("parameter 'w'"), ::testing::HasSubstr("as a constant"))));
}

TEST(AotModule, TheModuleIsRestoredWhenTheForwardThrows) {
  auto module = ConvBn();
  const auto before = module->named_parameters();
  const auto buffers_before = module->named_buffers();
  const at::Tensor original_weight = module->conv->weight;
  CompiledModule compiled = aot_module(module.ptr(), [&](torch::nn::Module& m, const TensorList& a) -> TensorList {
    auto& self = dynamic_cast<ConvBnImpl&>(m);
    // While traced, the module holds the lifted tensors (member and registry alike), not its own.
    if (!self.conv->weight.is_same(original_weight) && self.conv->weight.is_same(m.named_parameters()["conv.weight"]))
      throw std::runtime_error("forward failed on purpose");
    return {self.forward(a[0])};
  });
  EXPECT_THROW(compiled({torch::randn({2, 2, 5, 5})}), std::runtime_error);
  for (const auto& p : module->named_parameters())
    EXPECT_TRUE(p.value().is_same(before[p.key()])) << "registry entry of " << p.key();
  for (const auto& b : module->named_buffers())
    EXPECT_TRUE(b.value().is_same(buffers_before[b.key()])) << "registry entry of " << b.key();
  EXPECT_TRUE(module->conv->weight.is_same(before["conv.weight"]));
  EXPECT_TRUE(module->bn->running_mean.is_same(buffers_before["bn.running_mean"]));
  EXPECT_TRUE(module->bn->num_batches_tracked.is_same(buffers_before["bn.num_batches_tracked"]));
}

TEST(ReparametrizedModule, SwapsRegistryAndMembersAndRestoresThem) {
  auto module = ConvBn();
  const LiftedModuleState lifted = lifted_state(*module);
  ASSERT_EQ(lifted.parameter_names, (std::vector<std::string>{"conv.weight", "conv.bias", "bn.weight", "bn.bias"}));
  ASSERT_EQ(lifted.buffer_names,
            (std::vector<std::string>{"bn.running_mean", "bn.running_var", "bn.num_batches_tracked"}));
  TensorList replacements;
  for (const at::Tensor& t : lifted.tensors) replacements.push_back(t.detach().clone());
  {
    ModuleUseGuard use(*module);
    ReparametrizedModule swapped(*module, replacements);
    EXPECT_TRUE(module->conv->weight.is_same(replacements[0]));
    EXPECT_TRUE(module->bn->bias.is_same(replacements[3]));
    EXPECT_TRUE(module->bn->running_var.is_same(replacements[5]));
    EXPECT_TRUE(module->named_parameters()["bn.weight"].is_same(replacements[2]));
    EXPECT_TRUE(module->named_buffers()["bn.num_batches_tracked"].is_same(replacements[6]));
  }
  for (std::size_t i = 0; i < lifted.size(); ++i)
    EXPECT_TRUE(lifted_state(*module).tensors[i].is_same(lifted.tensors[i]));
  EXPECT_TRUE(module->conv->weight.is_same(lifted.tensors[0]));
  EXPECT_TRUE(module->bn->running_var.is_same(lifted.tensors[5]));
  EXPECT_THROW(ReparametrizedModule(*module, TensorList(2)), std::invalid_argument);
}

// ---- concurrency -----------------------------------------------------------------------------

TEST(ModuleUseGuard, OneUserOfAModuleTreeAtATime) {
  auto module = ConvBn();
  std::atomic<bool> inside{false}, overlapped{false};
  auto use = [&](const torch::nn::Module& m) {
    for (int i = 0; i < 20; ++i) {
      ModuleUseGuard guard(m);
      if (inside.exchange(true)) overlapped = true;
      std::this_thread::sleep_for(std::chrono::microseconds(200));
      inside = false;
    }
  };
  // The root on one thread, a submodule on the other: the trees overlap.
  std::thread a([&] { use(*module); });
  std::thread b([&] { use(*module->bn); });
  a.join();
  b.join();
  EXPECT_FALSE(overlapped);

  ModuleUseGuard held(*module->bn);
  EXPECT_THROW(ModuleUseGuard again(*module), std::logic_error) << "re-entry on one thread must not deadlock";
}

TEST(AotModule, ConcurrentCompilesOfDifferentModulesAndOfOneModule) {
  constexpr int kThreads = 4;
  std::vector<std::shared_ptr<torch::nn::Module>> eager(kThreads), modules(kThreads);
  std::vector<at::Tensor> inputs(kThreads);
  for (int i = 0; i < kThreads; ++i) {
    eager[i] = Mlp(3 + i, 5, 2).ptr();
    modules[i] = Mlp(3 + i, 5, 2).ptr();
    testing::copy_module_state(*eager[i], *modules[i]);
    inputs[i] = torch::randn({4, 3 + i});
  }
  const ModuleForward forward = module_cases()[0].forward;
  // Two compiled wrappers of module 0, called at once: their traces must take turns.
  std::vector<CompiledModule> compiled;
  for (int i = 0; i < kThreads; ++i) compiled.push_back(aot_module(modules[i], forward));
  compiled.push_back(aot_module(modules[0], forward));
  std::vector<TensorList> results(compiled.size());
  std::vector<std::string> errors(compiled.size());
  std::vector<std::thread> threads;
  for (std::size_t t = 0; t < compiled.size(); ++t)
    threads.emplace_back([&, t] {
      try {
        results[t] = compiled[t]({inputs[t % kThreads]});
      } catch (const std::exception& e) { errors[t] = e.what(); }
    });
  for (auto& th : threads) th.join();
  for (std::size_t t = 0; t < compiled.size(); ++t) {
    ASSERT_EQ(errors[t], "") << "thread " << t;
    const std::size_t i = t % kThreads;
    expect_close(results[t][0], forward(*eager[i], {inputs[i]})[0], "thread " + std::to_string(t));
    results[t][0].sum().backward();
  }
  // Module 0 got gradients from both of its compiled wrappers, like two eager calls.
  forward(*eager[0], {inputs[0]})[0].sum().backward();
  forward(*eager[0], {inputs[0]})[0].sum().backward();
  for (int i = 1; i < kThreads; ++i) forward(*eager[i], {inputs[i]})[0].sum().backward();
  for (int i = 0; i < kThreads; ++i) expect_same_state(*modules[i], *eager[i], "module " + std::to_string(i));
}

TEST(AotModule, RefusesANullModule) {
  EXPECT_THROW(aot_module(nullptr, module_cases()[0].forward), std::invalid_argument);
}

}  // namespace
}  // namespace aotpipe
