// aot_function end to end against eager PyTorch: outputs, gradients, inputs after the call,
// output aliasing, requires_grad and is_leaf of outputs, under both partitioners.
#include <aotpipe/graph/interpreter.h>
#include <aotpipe/graph/parser.h>
#include <aotpipe/driver/aot_function.h>
#include <aotpipe/backend/backend_notes.h>
#include <aotpipe/backend/backend_registry.h>
#include <aotpipe/backend/backend_traits.h>
#include <aotpipe/backend/backends.h>
#include <aotpipe/backend/run_compiler.h>
#include <aotpipe/cache/cache_key.h>
#include <aotpipe/cache/compile_cache.h>
#include <aotpipe/stages/compile_stages.h>
#include <aotpipe/stages/compile/compile_stage.h>
#include <aotpipe/stages/partition/default_partition.h>
#include <aotpipe/stages/partition/min_cut_partition.h>

#include "../runtime/temp_dir.h"
#include "eager_check.h"

#include <ATen/ATen.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <memory>
#include <mutex>
#include <set>

namespace aotpipe {
namespace {

struct Case {
  std::string name;
  Function fn;
  std::function<TensorList()> make_inputs;
};

at::Tensor param(std::vector<int64_t> sizes) { return torch::randn(sizes).requires_grad_(true); }

std::vector<Case> cases() {
  std::vector<Case> c;
  c.push_back({"mlp", [](const TensorList& a) { return TensorList{at::relu(at::addmm(a[2], a[0], a[1])).sum(1)}; },
               [] {
                 return TensorList{torch::randn({8, 16}), param({16, 32}), param({32})};
               }});
  // A tied parameter (GPT-2's lm_head.weight is its embedding's weight) passed twice: one leaf,
  // whose .grad is the sum over both uses, as in eager.
  c.push_back({"parameter_passed_twice",
               [](const TensorList& a) { return TensorList{at::embedding(a[0], a[1]).sum(1).mm(a[2].t()).sin()}; },
               [] {
                 at::Tensor tied = param({10, 4});
                 return TensorList{tied, torch::randint(0, 10, {3, 5}), tied};
               }});
  c.push_back({"cos_cos_cos", [](const TensorList& a) { return TensorList{a[0].cos().cos().cos()}; },
               [] { return TensorList{param({64})}; }});
  c.push_back({"input_mutation_non_leaf",
               [](const TensorList& a) {
                 a[0].mul_(2);
                 return TensorList{a[0] * 3};
               },
               [] {
                 return TensorList{param({3, 3}).clone()};
               }});
  c.push_back({"buffer_mutation",
               [](const TensorList& a) {
                 a[1].mul_(0.9).add_(a[0].detach().mean(0), 0.1);
                 return TensorList{(a[0] - a[1]).pow(2).sum()};
               },
               [] {
                 return TensorList{param({4, 5}), torch::zeros({5})};
               }});
  c.push_back({"metadata_mutation",
               [](const TensorList& a) {
                 a[0].t_();
                 return TensorList{a[0] * a[1]};
               },
               [] {
                 return TensorList{torch::randn({2, 3}), param({3, 2})};
               }});
  c.push_back({"outputs_alias_input",
               [](const TensorList& a) {
                 return TensorList{a[0].view(-1), a[0].t(), a[0] * 2};
               },
               [] {
                 return TensorList{param({3, 4})};
               }});
  c.push_back({"outputs_alias_intermediate",
               [](const TensorList& a) {
                 at::Tensor y = a[0] * 2;
                 return TensorList{y.view(-1), y.t(), y.detach()};
               },
               [] {
                 return TensorList{param({3, 4})};
               }});
  c.push_back({"intermediate_and_its_view",
               [](const TensorList& a) {
                 at::Tensor y = a[0].exp();
                 return TensorList{y, y.view(-1)};
               },
               [] {
                 return TensorList{param({2, 5})};
               }});
  c.push_back({"returns_input",
               [](const TensorList& a) {
                 return TensorList{a[0], a[1].sin()};
               },
               [] {
                 return TensorList{param({3}), param({3})};
               }});
  c.push_back({"duplicate_inputs_unmutated", [](const TensorList& a) { return TensorList{a[0] * a[1]}; },
               [] {
                 at::Tensor x = param({4});
                 return TensorList{x, x};
               }});
  c.push_back({"duplicate_inputs_mutated",
               [](const TensorList& a) {
                 a[0].add_(1);
                 return TensorList{a[0] * a[1]};
               },
               [] {
                 at::Tensor x = torch::randn({4});
                 return TensorList{x, x};
               }});
  c.push_back({"aliased_inputs_mutated",
               [](const TensorList& a) {
                 a[0].mul_(2);
                 return TensorList{a[0] + a[1].sum()};
               },
               [] {
                 at::Tensor base = param({4}).clone();
                 return TensorList{base.view({2, 2}), base.view({4})};
               }});
  c.push_back({"no_grad_inference",
               [](const TensorList& a) {
                 return TensorList{at::softmax(a[0], 1), a[0].view(-1)};
               },
               [] {
                 return TensorList{torch::randn({3, 7})};
               }});
  c.push_back({"unused_input_gradient", [](const TensorList& a) { return TensorList{a[0] * 2}; },
               [] {
                 return TensorList{param({3}), param({3})};
               }});
  return c;
}

class AotFunction : public ::testing::TestWithParam<std::tuple<std::string, bool>> {};

TEST_P(AotFunction, MatchesEager) {
  const auto& [name, min_cut] = GetParam();
  for (const Case& c : cases()) {
    if (c.name != name) continue;
    AotConfig config;
    config.partition_fn =
        min_cut ? partitioners::min_cut_rematerialization_partition() : partitioners::default_partition();
    CompiledFunction compiled = aot_function(c.fn, config);
    testing::expect_matches_eager(c.fn, compiled, c.make_inputs, c.name);
    // A second call reuses the compile.
    testing::expect_matches_eager(c.fn, compiled, c.make_inputs, c.name + " (second call)");
    EXPECT_EQ(compiled.num_compiled(), 1u);
    return;
  }
  FAIL() << "no case " << name;
}

std::vector<std::tuple<std::string, bool>> all_params() {
  std::vector<std::tuple<std::string, bool>> p;
  for (const Case& c : cases()) {
    p.emplace_back(c.name, true);
    p.emplace_back(c.name, false);
  }
  return p;
}

INSTANTIATE_TEST_SUITE_P(Cases, AotFunction, ::testing::ValuesIn(all_params()), [](const auto& info) {
  return std::get<0>(info.param) + (std::get<1>(info.param) ? "_min_cut" : "_default");
});

TEST(AotFunctionRuntime, NewSignatureRecompiles) {
  CompiledFunction f = aot_function([](const TensorList& a) { return TensorList{a[0] * 2}; });
  f({torch::randn({3})});
  f({torch::randn({3})});
  EXPECT_EQ(f.num_compiled(), 1u);
  f({torch::randn({4})});
  f({torch::randn({3}, torch::requires_grad())});
  EXPECT_EQ(f.num_compiled(), 3u);
}

// A backend that records, per compiler call, the object its compile group shares under "test"
// (the CUDA-graph backend shares its memory pool so).
struct GroupRecorder {
  std::mutex mutex;
  std::vector<std::shared_ptr<void>> seen;
  Compiler compiler() {
    return [this](const Graph& graph, const std::vector<TensorMeta>&) -> CompiledGraph {
      CompileGroup* group = current_compile_group();
      std::shared_ptr<void> shared = group ? group->shared("test", [] { return std::make_shared<int>(0); }) : nullptr;
      {
        const std::lock_guard lock(mutex);
        seen.push_back(shared);
      }
      auto interpreter = std::make_shared<const Interpreter>(graph);
      return [interpreter](TensorList args) { return interpreter->run(std::move(args)); };
    };
  }
};

TEST(AotFunctionRuntime, ForwardAndBackwardOfOneFunctionCompileInOneGroup) {
  GroupRecorder recorder;
  AotConfig config;
  config.fw_compiler = recorder.compiler();
  auto fn = [](const TensorList& a) { return TensorList{(a[0] * a[1]).sin().sum()}; };
  for (int function = 0; function < 2; ++function) {
    CompiledFunction f = aot_function(fn, config);
    f({param({4}), param({4})})[0].backward();
  }
  ASSERT_EQ(recorder.seen.size(), 4u);  // two functions, each a forward and a backward
  EXPECT_NE(recorder.seen[0], nullptr);
  EXPECT_EQ(recorder.seen[0], recorder.seen[1]);
  EXPECT_EQ(recorder.seen[2], recorder.seen[3]);
  EXPECT_NE(recorder.seen[0], recorder.seen[2]);
  EXPECT_EQ(current_compile_group(), nullptr) << "no group outlives its compile";
}

// A cache hit compiles each graph at its first call: the two still share one group.
TEST(AotFunctionRuntime, GraphsCompiledAtFirstCallShareTheirGroup) {
  GroupRecorder recorder;
  const Graph graph = parse_graph(R"(graph g(%x: f32[3]):
  %y: f32[3] = aten::sin(%x)
  return (%y))");
  auto group = std::make_shared<CompileGroup>();
  auto of = [&graph]() -> const Graph& { return graph; };
  CompiledGraph forward = compile_on_first_call(recorder.compiler(), of, group);
  CompiledGraph backward = compile_on_first_call(recorder.compiler(), of, group);
  CompiledGraph alone = compile_on_first_call(recorder.compiler(), of);
  EXPECT_TRUE(recorder.seen.empty()) << "nothing compiles before its first call";
  for (CompiledGraph* g : {&forward, &backward, &alone}) (*g)({torch::randn({3})});
  ASSERT_EQ(recorder.seen.size(), 3u);
  EXPECT_EQ(recorder.seen[0], recorder.seen[1]);
  EXPECT_NE(recorder.seen[0], recorder.seen[2]);
}

// A cache hit's training graphs: the forward's first call compiles the backward too, in the
// forward's group, so a backend has seen the backward before the forward first runs, as after a
// compile (the CUDA-graph backend lends saved values only to a backward it runs).
TEST(AotFunctionRuntime, AForwardsFirstCallCompilesItsBackwardToo) {
  GroupRecorder recorder;
  std::vector<std::string> compiled;
  const Compiler naming = [&](const Graph& graph, const std::vector<TensorMeta>& metas) {
    compiled.push_back(graph.name());
    return recorder.compiler()(graph, metas);
  };
  const Graph forward_graph = parse_graph(R"(graph forward(%x: f32[3]):
  %y: f32[3] = aten::sin(%x)
  return (%y, %x))");
  const Graph backward_graph = parse_graph(R"(graph backward(%x: f32[3], %g: f32[3]):
  %c: f32[3] = aten::cos(%x)
  %dx: f32[3] = aten::mul.Tensor(%g, %c)
  return (%dx))");
  CompiledTrainingGraphs graphs = compile_training_graphs_on_first_call(
      naming, [&]() -> const Graph& { return forward_graph; }, [] { return GraphOutputUse{.saved_outputs_from = 1}; },
      naming, [&]() -> const Graph& { return backward_graph; });
  EXPECT_TRUE(compiled.empty()) << "nothing compiles before a first call";
  const at::Tensor x = torch::randn({3});
  const TensorList out = graphs.forward({x});
  EXPECT_EQ(compiled, (std::vector<std::string>{"forward", "backward"}));
  const TensorList dx = graphs.backward({out[1], torch::ones({3})});
  EXPECT_EQ(compiled.size(), 2u) << "the backward compiled once";
  EXPECT_TRUE(torch::allclose(dx[0], x.cos()));
  ASSERT_EQ(recorder.seen.size(), 2u);
  EXPECT_EQ(recorder.seen[0], recorder.seen[1]) << "one group";
}

// The forward's compiler is told which of its outputs are saved for the backward (the outputs
// after the forward's returns), as a backend that lends them needs; the backward's is told none.
TEST(AotFunctionRuntime, TheForwardCompilerIsToldWhichOutputsAreSaved) {
  struct Seen {
    std::string graph;
    std::size_t outputs;
    std::optional<std::size_t> saved_from;
  };
  std::vector<Seen> seen;
  AotConfig config;
  config.fw_compiler = [&seen](const Graph& graph, const std::vector<TensorMeta>&) -> CompiledGraph {
    seen.push_back({graph.name(), graph.num_outputs(), current_graph_output_use().saved_outputs_from});
    auto interpreter = std::make_shared<const Interpreter>(graph);
    return [interpreter](TensorList args) { return interpreter->run(std::move(args)); };
  };
  // Two returns (an output and the mutated input), and values saved for the backward.
  auto fn = [](const TensorList& a) {
    a[0].add_(1);
    return TensorList{(a[0] * a[1]).sin().sum()};
  };
  CompiledFunction f = aot_function(fn, config);
  f({torch::randn({4}), param({4})})[0].backward();
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[0].graph, "forward");
  EXPECT_EQ(seen[0].saved_from, 2u) << "the mutated input's new value, then the output";
  EXPECT_GT(seen[0].outputs, 2u) << "the saved values follow";
  EXPECT_EQ(seen[1].graph, "backward");
  EXPECT_EQ(seen[1].saved_from, std::nullopt);
  EXPECT_EQ(current_graph_output_use().saved_outputs_from, std::nullopt) << "no use outlives its compile";

  // At a first call (a cache hit's graphs), the use is asked when the graph compiles.
  const Graph graph = parse_graph(R"(graph g(%x: f32[3]):
  %y: f32[3] = aten::sin(%x)
  return (%y, %x))");
  CompiledGraph lazy = compile_on_first_call(
      config.fw_compiler, [&graph]() -> const Graph& { return graph; }, nullptr,
      [] { return GraphOutputUse{.saved_outputs_from = 1}; });
  lazy({torch::randn({3})});
  ASSERT_EQ(seen.size(), 3u);
  EXPECT_EQ(seen[2].saved_from, 1u);

  // A cache hit's forward is told the same when it compiles at its first call.
  const testing::TempDir dir;
  CompileCacheOptions cache_options;
  cache_options.directory = dir.path;
  auto cache = std::make_shared<CompileCache>(std::move(cache_options));
  config.fw_compiler = named_compiler("test.output_use_recorder/1", config.fw_compiler);
  for (int compile = 0; compile < 2; ++compile) {  // a miss that stores, then a hit
    seen.clear();
    CompiledFunction cached = aot_function(fn, config, cache);
    const at::Tensor loss = cached({torch::randn({4}), param({4})})[0];
    ASSERT_EQ(seen.size(), 2u) << "compile " << compile << ": the backward compiled by the forward's first call";
    loss.backward();
    ASSERT_EQ(seen.size(), 2u) << "compile " << compile;
    EXPECT_EQ(seen[0].graph, "forward");
    EXPECT_EQ(seen[0].saved_from, 2u) << "compile " << compile;
    EXPECT_EQ(seen[1].saved_from, std::nullopt) << "compile " << compile;
  }
}

// The compile tells a backend which graph is an inference graph (GraphOutputUse::inference), at
// once and at a cache hit's first call; the interpreter backend then computes the calls that
// depend on no input once (InterpreterOptions::fold_constants), and a training step's never.
TEST(AotFunctionRuntime, InferenceGraphsFoldTheirConstantSubgraphs) {
  std::vector<bool> inference;
  AotConfig config;
  config.fw_compiler =
      named_compiler("test.inference_recorder/1", [&](const Graph& graph, const std::vector<TensorMeta>& metas) {
        inference.push_back(current_graph_output_use().inference);
        return backends::interpreter()(graph, metas);
      });
  // A position table from arange, as a model's position ids are: it depends on no input.
  auto fn = [](const TensorList& a) {
    const at::Tensor positions = at::arange(a[0].size(0), a[0].options()).mul(0.5).cos();
    return TensorList{(a[0] + positions).sin() * a[1]};
  };
  const at::Tensor x = torch::randn({6}), w = torch::randn({6});
  const at::Tensor expected = fn({x, w})[0];
  const testing::TempDir dir;
  CompileCacheOptions cache_options;
  cache_options.directory = dir.path;
  auto cache = std::make_shared<CompileCache>(std::move(cache_options));
  for (int compile = 0; compile < 2; ++compile) {  // a miss that stores, then a hit
    inference.clear();
    CompiledFunction f = aot_function(fn, config, cache);
    const std::uint64_t before = interpreter_counters().folded_calls;
    EXPECT_TRUE(at::allclose(f({x, w})[0], expected)) << "compile " << compile;
    EXPECT_TRUE(at::allclose(f({x, w})[0], expected)) << "compile " << compile;
    EXPECT_EQ(inference, std::vector<bool>{true}) << "compile " << compile;
    EXPECT_EQ(interpreter_counters().folded_calls, before + 3) << "arange, mul and cos, once; compile " << compile;
  }
  inference.clear();
  CompiledFunction training = aot_function(fn, config);
  const std::uint64_t before = interpreter_counters().folded_calls;
  at::Tensor wp = w.clone().requires_grad_();
  training({x, wp})[0].sum().backward();
  EXPECT_EQ(inference, (std::vector<bool>{false, false})) << "forward and backward";
  EXPECT_EQ(interpreter_counters().folded_calls, before) << "a training step folds nothing";
  EXPECT_TRUE(at::allclose(wp.grad(), (x + at::arange(6, x.options()).mul(0.5).cos()).sin()));
}

// Backends by name (backend/backend_registry.h): the interpreter is always there; a registration
// makes a fresh compiler per lookup and a later one of the same name replaces it.
TEST(AotFunctionRuntime, BackendsAreFoundByName) {
  const std::optional<Compiler> interpreter = find_backend("interpreter");
  ASSERT_TRUE(interpreter.has_value());
  EXPECT_EQ(identity_of(*interpreter), identity_of(backends::interpreter()));
  EXPECT_FALSE(find_backend("no_such_backend").has_value());

  static int made = 0;  // static: the registration outlives this test in the process-wide registry
  made = 0;
  register_backend("registry_test", [] {
    ++made;
    return with_backend_traits(backends::interpreter(), {.recomputation_pays = false});
  });
  const std::vector<std::string> names = registered_backends();
  EXPECT_TRUE(std::is_sorted(names.begin(), names.end()));
  EXPECT_NE(std::find(names.begin(), names.end(), "registry_test"), names.end());
  EXPECT_NE(std::find(names.begin(), names.end(), "interpreter"), names.end());
  const std::optional<Compiler> found = find_backend("registry_test");
  ASSERT_TRUE(found.has_value());
  EXPECT_EQ(made, 1);
  EXPECT_FALSE(backend_traits_of(*found).recomputation_pays);
  // The compiler found compiles: a function run through it matches eager.
  AotConfig config;
  config.fw_compiler = *found;
  CompiledFunction f = aot_function([](const TensorList& a) { return TensorList{(a[0] * a[0]).sum()}; }, config);
  const TensorList x{param({4})};
  f(x)[0].backward();
  EXPECT_TRUE(at::allclose(x[0].grad(), 2 * x[0].detach()));

  register_backend("registry_test", [] { return backends::interpreter(); });
  EXPECT_TRUE(backend_traits_of(*find_backend("registry_test")).recomputation_pays) << "the later registration";
  EXPECT_EQ(made, 1);
}

// A config naming no partitioner takes the forward compiler's choice (backend/backend_traits.h):
// min-cut unless the backend declares that recomputation does not pay; a named one wins.
TEST(AotFunctionRuntime, BackendTraitsPickThePartitioner) {
  const Compiler saving = with_backend_traits(backends::interpreter(), {.recomputation_pays = false});
  EXPECT_EQ(identity_of(saving), identity_of(backends::interpreter())) << "the cache still keys on its name";
  EXPECT_FALSE(backend_traits_of(saving).recomputation_pays);
  EXPECT_TRUE(backend_traits_of(backends::interpreter()).recomputation_pays);
  const Compiler plain = with_backend_traits(
      [](const Graph& g, const std::vector<TensorMeta>&) -> CompiledGraph {
        auto interpreter = std::make_shared<const Interpreter>(g);
        return [interpreter](TensorList args) { return interpreter->run(std::move(args)); };
      },
      {.recomputation_pays = false});
  EXPECT_FALSE(backend_traits_of(plain).recomputation_pays);
  EXPECT_EQ(identity_of(plain), std::nullopt);

  // gelu then sum: min-cut recomputes the pointwise chain, the default partitioner saves it.
  auto fn = [](const TensorList& a) { return TensorList{at::gelu(a[0] * a[1]).exp().sum()}; };
  const TensorList inputs{param({16}), param({16})};
  auto partitioner_of = [&](AotConfig config) {
    CompiledFunction f = aot_function(fn, std::move(config));
    f(inputs)[0].backward();
    return f.compiled_state(inputs)->partition->partitioner;
  };
  partitioners::MinCutOptions unfused;
  unfused.ban_recompute_used_far_apart = false;
  AotConfig config;
  EXPECT_EQ(partitioner_of(config), identity_of(partitioners::min_cut_rematerialization_partition(unfused)))
      << "the interpreter fuses nothing: min-cut without the fusion heuristic";
  config.fw_compiler = with_backend_traits(backends::interpreter(), {.fuses_recomputed_ops = true});
  EXPECT_EQ(partitioner_of(config), identity_of(partitioners::min_cut_rematerialization_partition()))
      << "a fusing backend: PyTorch's settings";
  config.fw_compiler = saving;
  EXPECT_EQ(partitioner_of(config), identity_of(partitioners::default_partition()));
  config.partition_fn = partitioners::min_cut_rematerialization_partition();
  EXPECT_EQ(partitioner_of(config), identity_of(partitioners::min_cut_rematerialization_partition()));
}

// Swin v2's cosine attention (q and k divided by their norms, then multiplied: an unfusible bmm).
// PyTorch's min-cut bans recomputing the divisions for the backward's readers, which come after
// the bmm: it saves them on top of what it needs anyway. A backend that fuses nothing (the
// interpreter) recomputes them from the saved projections and saves less; both match eager.
TEST(AotFunctionRuntime, AnUnfusingBackendSavesWhatTheFusionHeuristicWouldNot) {
  auto fn = [](const TensorList& a) {
    auto normalize = [](const at::Tensor& x) {
      return x / at::linalg_vector_norm(x, 2, at::IntArrayRef{-1}, /*keepdim=*/true).clamp_min(1e-12);
    };
    at::Tensor q = normalize(at::matmul(a[0], a[1]));
    at::Tensor k = normalize(at::matmul(a[0], a[2]));
    at::Tensor attention = at::bmm(q, k.transpose(1, 2)).softmax(-1);
    return TensorList{at::bmm(attention, a[0]).sum()};
  };
  const TensorList inputs{param({4, 8, 16}), param({16, 16}), param({16, 16})};
  auto compiled = [&](AotConfig config) {
    CompiledFunction f = aot_function(fn, std::move(config));
    const TensorList out = f(inputs);
    out[0].backward();
    return std::pair{out[0].detach(), f.compiled_state(inputs)->partition->saved_bytes};
  };
  const TensorList eager_inputs{inputs[0].detach().clone().requires_grad_(true),
                                inputs[1].detach().clone().requires_grad_(true),
                                inputs[2].detach().clone().requires_grad_(true)};
  const at::Tensor eager = fn(eager_inputs)[0];
  eager.backward();
  std::vector<at::Tensor> eager_grads;
  for (const at::Tensor& t : eager_inputs) eager_grads.push_back(t.grad().clone());

  auto check_against_eager = [&](const at::Tensor& out, const char* which) {
    EXPECT_TRUE(at::allclose(out, eager.detach(), 1e-5, 1e-5)) << which;
    for (std::size_t i = 0; i < inputs.size(); ++i) {
      EXPECT_TRUE(at::allclose(inputs[i].grad(), eager_grads[i], 1e-5, 1e-5)) << which << ", gradient " << i;
      inputs[i].mutable_grad().reset();
    }
  };
  const auto [unfused_out, unfused_saved] = compiled(AotConfig{});
  check_against_eager(unfused_out, "interpreter");
  AotConfig pytorch;
  pytorch.fw_compiler = with_backend_traits(backends::interpreter(), {.fuses_recomputed_ops = true});
  const auto [fused_out, fused_saved] = compiled(pytorch);
  check_against_eager(fused_out, "PyTorch's settings");
  EXPECT_LT(unfused_saved, fused_saved);
}

TEST(AotFunctionRuntime, CreateGraphWorksOnceAndDoubleBackwardRaises) {
  auto fn = [](const TensorList& a) { return TensorList{(a[0] * a[0]).sin()}; };
  CompiledFunction f = aot_function(fn);
  at::Tensor x = torch::randn({3}, torch::requires_grad());
  // First order with create_graph=True works as in eager (PyTorch raises only when a
  // second-order gradient has to flow through the compiled backward).
  auto g = torch::autograd::grad({f({x})[0].sum()}, {x}, {}, /*retain_graph=*/true, /*create_graph=*/true);
  auto ge = torch::autograd::grad({fn({x})[0].sum()}, {x}, {}, true, true);
  EXPECT_TRUE(at::allclose(g[0], ge[0]));
  EXPECT_TRUE(g[0].requires_grad());
  // Differentiating that gradient again is refused with a clear message, never silently wrong.
  try {
    torch::autograd::grad({g[0].sum()}, {x});
    FAIL() << "expected an error";
  } catch (const std::exception& e) {
    EXPECT_THAT(e.what(), ::testing::HasSubstr("double backward through a compiled function is not supported"));
  }
  // Plain first order is unaffected.
  auto g1 = torch::autograd::grad({f({x})[0].sum()}, {x});
  EXPECT_TRUE(at::allclose(g1[0], ge[0]));
  EXPECT_FALSE(g1[0].requires_grad());
}

// The compiled backward frees the forward's saved tensors as it goes (Note [Clearing saved
// tensors]); a second backward without retain_graph then fails as eager's does, and with
// retain_graph both backwards see them.
TEST(AotFunctionRuntime, SecondBackwardNeedsRetainGraphAsInEager) {
  auto fn = [](const TensorList& a) { return TensorList{(a[0] * a[0]).sin()}; };
  CompiledFunction f = aot_function(fn);
  at::Tensor x = torch::randn({5}, torch::requires_grad());
  at::Tensor y = f({x})[0].sum();
  y.backward();
  try {
    y.backward();
    FAIL() << "expected an error";
  } catch (const std::exception& e) {
    EXPECT_THAT(e.what(), ::testing::HasSubstr("Trying to backward through the graph a second time"));
  }
  x.mutable_grad().reset();
  at::Tensor z = f({x})[0].sum();
  z.backward({}, /*retain_graph=*/true);
  z.backward();
  at::Tensor xe = x.detach().clone().requires_grad_(true);
  (xe * xe).sin().sum().backward();
  EXPECT_TRUE(at::allclose(x.grad(), 2 * xe.grad()));
}

// Outputs the loss does not use get zero tangents, and only those the backward graph takes.
TEST(AotFunctionRuntime, OutputsWithoutGradientGetZeroTangents) {
  auto fn = [](const TensorList& a) { return TensorList{a[0].exp(), a[0] * a[1], a[1].cos()}; };
  CompiledFunction f = aot_function(fn);
  at::Tensor x = torch::randn({4}, torch::requires_grad()), w = torch::randn({4}, torch::requires_grad());
  at::Tensor xe = x.detach().clone().requires_grad_(true), we = w.detach().clone().requires_grad_(true);
  f({x, w})[1].sum().backward();
  fn({xe, we})[1].sum().backward();
  EXPECT_TRUE(at::allclose(x.grad(), xe.grad()));
  EXPECT_TRUE(at::allclose(w.grad(), we.grad()));
}

// A backend that fuses primitives asks for composite ops decomposed (PyTorch's
// aot_function(decompositions=...)): gelu becomes erf arithmetic in the forward, its backward too
// when the table has it, and values equal eager's. The cache keys the table by its identity and
// bypasses a table that has none.
TEST(AotFunctionRuntime, DecompositionsReplaceOpsInTheCompiledGraphs) {
  auto fn = [](const TensorList& a) { return TensorList{at::gelu(at::mm(a[0], a[1])).sum(1)}; };
  AotConfig config;
  config.decompositions["aten::gelu"] = [](const std::vector<c10::IValue>& args) -> std::vector<c10::IValue> {
    const at::Tensor& x = args[0].toTensor();
    return {x * 0.5 * (at::erf(x * M_SQRT1_2) + 1)};
  };
  config.decompositions_identity = "test.gelu_erf/1";
  CompiledFunction decomposed = aot_function(fn, config);
  CompiledFunction fused = aot_function(fn);
  at::Tensor x = torch::randn({4, 8}), w = torch::randn({8, 6}, torch::requires_grad());
  const auto state = decomposed.compiled_state({x, w});
  const auto ops = [](const Graph& g) {
    std::multiset<std::string> names;
    for (const Node* n : g.nodes())
      if (n->is_call()) names.insert(n->qualified_name());
    return names;
  };
  ASSERT_TRUE(state->partition);
  EXPECT_EQ(ops(state->partition->forward).count("aten::gelu"), 0u);
  EXPECT_EQ(ops(state->partition->forward).count("aten::erf"), 1u);
  EXPECT_EQ(ops(fused.compiled_state({x, w})->partition->forward).count("aten::gelu"), 1u)
      << "without a table the fused op stays";
  at::Tensor we = w.detach().clone().requires_grad_(true);
  at::Tensor out = decomposed({x, w})[0];
  at::Tensor expected = fn({x, we})[0];
  EXPECT_TRUE(at::allclose(out, expected, 1e-5, 1e-6));
  out.sum().backward();
  expected.sum().backward();
  EXPECT_TRUE(at::allclose(w.grad(), we.grad(), 1e-5, 1e-6));

  const TensorList args{x, w};
  const CacheKeyOrBypass with = make_cache_key(nullptr, fn, args, config, default_compile_pipeline_text());
  const CacheKeyOrBypass without = make_cache_key(nullptr, fn, args, AotConfig{}, default_compile_pipeline_text());
  ASSERT_TRUE(with.key && without.key);
  EXPECT_NE(with.key->digest, without.key->digest);
  config.decompositions_identity.clear();
  const CacheKeyOrBypass anonymous = make_cache_key(nullptr, fn, args, config, default_compile_pipeline_text());
  EXPECT_FALSE(anonymous.key);
  EXPECT_THAT(anonymous.bypass_reason, ::testing::HasSubstr("decompositions have no identity"));
}

// The gradients a compiled backward receives are its own to free after their last read, as
// eager's nodes free theirs: libtorch's CppNode keeps the vector it passes to a custom Function's
// backward, so the runtime takes the tangents out of that vector. Held there, each lived to the
// end of the whole compiled backward (DINOv2's training step peaked 4 KB over eager's).
TEST(AotFunction, TheCompiledBackwardOwnsItsTangents) {
  std::vector<long> tangent_references;
  AotConfig config;
  config.bw_compiler = [&tangent_references](const Graph& g, const std::vector<TensorMeta>& metas) {
    CompiledGraph inner = backends::interpreter()(g, metas);
    return CompiledGraph([&tangent_references, inner](TensorList args) {
      tangent_references.push_back(static_cast<long>(args.back().use_count()));
      return inner(std::move(args));
    });
  };
  CompiledFunction f = aot_function([](const TensorList& a) { return TensorList{a[0].sin() * a[1]}; }, config);
  const at::Tensor x = at::randn({8}).requires_grad_(), w = at::randn({8});
  // The output's gradient (w) is made by the engine's MulBackward: nobody else holds it.
  (f({x, w})[0] * w).sum().backward();
  ASSERT_EQ(tangent_references.size(), 1u);
  EXPECT_EQ(tangent_references[0], 1) << "something besides the backward's arguments holds its tangent";
  EXPECT_TRUE(at::allclose(x.grad(), x.detach().cos() * w * w));
}

}  // namespace
}  // namespace aotpipe
