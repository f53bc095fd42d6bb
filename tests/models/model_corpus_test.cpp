// Models and the 102-case metadata corpus through aot_function, against eager PyTorch, under both
// partitioners: outputs, output aliasing, requires_grad/is_leaf, inputs after the call (mutations,
// BatchNorm running statistics) and gradients (tests/runtime/eager_check.h).
#include <aotpipe/backend/backends.h>
#include <aotpipe/driver/aot_function.h>
#include <aotpipe/graph/interpreter.h>
#include <aotpipe/graph/memory_plan.h>
#ifdef AOTPIPE_TEST_HAVE_CUDA_GRAPHS
#include <aotpipe/cuda/cuda_graphs.h>
#endif
#include <aotpipe/stages/partition/default_partition.h>
#include <aotpipe/stages/partition/min_cut_partition.h>

#include "eager_check.h"
#include "test_support.h"
#include "metadata_corpus.h"
#include "models.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <gmock/gmock.h>
#include <gtest/gtest-spi.h>
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <functional>
#include <cstdio>
#include <map>
#include <optional>
#include <string_view>

namespace aotpipe::testing {
namespace {

// AOTPIPE_TEST_DEVICE=cuda:0 runs every case on that device (the GPU machine, see docs/cuda.md):
// inputs are moved with their storage sharing kept (one copy per storage, views re-made over it);
// leaves stay leaves, a non-leaf input becomes a clone of a leaf on the device.
c10::Device test_device() {
  static const c10::Device device(std::getenv("AOTPIPE_TEST_DEVICE") ? std::getenv("AOTPIPE_TEST_DEVICE") : "cpu");
  return device;
}

TensorList on_test_device(const TensorList& inputs) {
  const c10::Device device = test_device();
  if (device.is_cpu()) return inputs;
  at::NoGradGuard no_grad;
  std::map<const c10::StorageImpl*, at::Tensor> moved_storages;
  TensorList out;
  for (const at::Tensor& t : inputs) {
    if (!t.defined()) {
      out.push_back(t);
      continue;
    }
    at::Tensor& bytes = moved_storages[t.storage().unsafeGetStorageImpl()];
    if (!bytes.defined()) {
      const auto n = static_cast<int64_t>(t.storage().nbytes());
      bytes = at::empty({0}, t.options().dtype(at::kByte)).set_(t.storage(), 0, {n}, {1}).to(device);
    }
    at::Tensor moved = at::empty({0}, t.options().device(device).requires_grad(false))
                           .set_(bytes.storage(), t.storage_offset(), t.sizes(), t.strides());
    if (t.requires_grad()) {
      moved.requires_grad_(true);
      if (!t.is_leaf()) {
        at::AutoGradMode grad(true);
        moved = moved.clone();
      }
    }
    out.push_back(moved);
  }
  return out;
}

// On another device than the CPU, programs written for the CPU that eager itself cannot run there
// (they make CPU tensors with a factory that names no device and mix them with the inputs), and
// programs aotpipe cannot compile there yet: each must fail the way it says, never pass silently.
struct DeviceExpectation {
  std::string eager_message;     // a substring of eager's error; empty: eager runs (aotpipe's known gap)
  std::string compiled_message;  // a substring of aotpipe's error (at compile time where it can tell);
                                 // empty: the compiled function runs (a divergence, said where listed)
};
const DeviceExpectation* expected_failure_on_test_device(const std::string& name) {
  static const std::map<std::string, DeviceExpectation> cases{
      {"transformer_block",
       {"expected self and mask to be on the same device",
        "aten::masked_fill.Scalar: expected all tensors to be on the same device"}},
      // Functionalized, the set_ round trip reads the CPU tensor in an add: refused at compile time.
      {"set__nop",
       {"to a storage on different device", "expected all tensors to be on the same device, as eager does"}},
      // Functionalization turns this set_ into the input's new value: the epilogue's set_ raises eager's error.
      {"set__input_mutation", {"to a storage on different device", "to a storage on different device"}},
      {"set__to_intermediate_then_return_input",
       {"to a storage on different device", "to a storage on different device"}},
  };
  if (test_device().is_cpu()) return nullptr;
  auto it = cases.find(name);
  return it == cases.end() ? nullptr : &it->second;
}

// Runs `call`; true when it raised an error containing `message`.
bool fails_with(const std::function<void()>& call, const std::string& message) {
  try {
    call();
  } catch (const std::exception& e) { return std::string(e.what()).find(message) != std::string::npos; }
  return false;
}

void expect_device_failure(const std::string& name, const DeviceExpectation& expected, const Function& eager,
                           const CompiledFunction& compiled, const std::function<TensorList()>& make_inputs) {
  if (expected.eager_message.empty())
    EXPECT_NO_THROW((void)eager(make_inputs())) << name << ": eager on " << test_device() << " now fails";
  else
    EXPECT_TRUE(fails_with([&] { (void)eager(make_inputs()); }, expected.eager_message))
        << name << ": eager on " << test_device() << " no longer fails with '" << expected.eager_message << "'";
  if (expected.compiled_message.empty())
    EXPECT_NO_THROW((void)compiled(make_inputs()))
        << name << " on " << test_device() << ": the compiled function now fails";
  else
    EXPECT_TRUE(fails_with([&] { (void)compiled(make_inputs()); }, expected.compiled_message))
        << name << " on " << test_device() << ": expected an error containing '" << expected.compiled_message << "'";
}

std::function<TensorList()> on_test_device(std::function<TensorList()> make_inputs) {
  return [make_inputs = std::move(make_inputs)] { return on_test_device(make_inputs()); };
}

enum class Partition { kDefault, kMinCut };
void PrintTo(Partition p, std::ostream* os) { *os << (p == Partition::kMinCut ? "min_cut" : "default"); }

// AOTPIPE_TEST_BACKEND=cuda_graphs compiles every case with the CUDA-graph backend (with
// AOTPIPE_TEST_DEVICE=cuda:0, on the GPU machine); cuda_graphs_copy_all also copies parameters
// in at every call instead of reading them in place, so that later calls replay too (each call
// of a case makes new input tensors).
Compiler test_backend() {
  const char* backend = std::getenv("AOTPIPE_TEST_BACKEND");
  if (!backend || std::string_view(backend) == "interpreter") return {};
  if (std::string_view(backend) == "planned") return backends::planned_interpreter();
#ifdef AOTPIPE_TEST_HAVE_CUDA_GRAPHS
  if (std::string_view(backend) == "cuda_graphs") return backends::cuda_graphs();
  if (std::string_view(backend) == "cuda_graphs_copy_all")
    return backends::cuda_graphs({.outputs = CudaGraphOptions::Outputs::fresh, .static_parameters = false});
#endif
  throw std::invalid_argument(std::string("AOTPIPE_TEST_BACKEND=") + backend +
                              ": not a backend this test was built with");
}

#ifdef AOTPIPE_TEST_HAVE_CUDA_GRAPHS
// Prints how a cuda_graphs run went, for the log: graphs captured, calls replayed, calls the
// interpreter served (refused captures, parameters at a new address).
class CudaGraphCountsReport : public ::testing::Environment {
  void TearDown() override {
    if (!std::getenv("AOTPIPE_TEST_BACKEND")) return;
    const CudaGraphCounters c = cuda_graph_counters();
    std::printf("cuda_graphs: %llu graphs captured, %llu calls replayed, %llu calls in the interpreter\n",
                static_cast<unsigned long long>(c.captures), static_cast<unsigned long long>(c.replays),
                static_cast<unsigned long long>(c.fallback_calls));
  }
};
[[maybe_unused]] ::testing::Environment* const cuda_graph_counts_report =
    ::testing::AddGlobalTestEnvironment(new CudaGraphCountsReport);
#endif

// AOTPIPE_TEST_BACKEND=planned: the runs used their arenas, and no out= kernel refused a call.
[[maybe_unused]] ::testing::Environment* const planned_runs_check =
    ::testing::AddGlobalTestEnvironment(testing::planned_runs_check());

// Every graph a compile hands its backend also gets a memory plan (graph/memory_plan.h), which
// must be sound: no two tensors alive at once share a byte.
std::atomic<std::size_t> graphs_planned{0};
Compiler planning(Compiler backend) {
  if (!backend) backend = backends::interpreter();
  return [backend](const Graph& graph, const std::vector<TensorMeta>& inputs) {
    const MemoryPlan plan = plan_memory(graph);
    if (auto overlap = plan_overlap(plan))
      throw std::logic_error("memory plan of graph '" + graph.name() + "': " + *overlap);
    ++graphs_planned;
    return backend(graph, inputs);
  };
}

AotConfig config_for(Partition p, bool keep_input_mutations = false) {
  AotConfig config;
  config.fw_compiler = planning(test_backend());
  config.partition_fn =
      p == Partition::kMinCut ? partitioners::min_cut_rematerialization_partition() : partitioners::default_partition();
  config.keep_inference_input_mutations = keep_input_mutations;
  return config;
}

std::string param_name(const ::testing::TestParamInfo<std::tuple<std::string, Partition>>& info) {
  return std::get<0>(info.param) + (std::get<1>(info.param) == Partition::kMinCut ? "_min_cut" : "_default");
}

template <typename Case>
std::vector<std::tuple<std::string, Partition>> params_of(const std::vector<Case>& cases) {
  std::vector<std::tuple<std::string, Partition>> p;
  for (const Case& c : cases)
    for (Partition part : {Partition::kDefault, Partition::kMinCut}) p.emplace_back(c.name, part);
  return p;
}

// ================================== models ==================================
class ModelTest : public ::testing::TestWithParam<std::tuple<std::string, Partition>> {};

const ModelCase& model_named(const std::string& name) {
  for (const ModelCase& c : model_cases())
    if (c.name == name) return c;
  throw std::logic_error("no model " + name);
}

TEST_P(ModelTest, MatchesEager) {
  const auto& [name, partition] = GetParam();
  const ModelCase& model = model_named(name);
  CompiledFunction compiled = aot_function(model.fn, config_for(partition));
  if (const DeviceExpectation* expected = expected_failure_on_test_device(name)) {
    expect_device_failure(name, *expected, model.fn, compiled, on_test_device(model.make_inputs));
    return;
  }
  const std::size_t planned_before = graphs_planned;
  expect_matches_eager(model.fn, compiled, on_test_device(model.make_inputs), name);
  expect_matches_eager(model.fn, compiled, on_test_device(model.make_inputs), name + " (second call)");
  EXPECT_EQ(compiled.num_compiled(), 1u) << "the second call with the same signature recompiled";
  EXPECT_GT(graphs_planned, planned_before) << "no graph of the compile was planned";
}

// The buffers a model updates in place (BatchNorm's running statistics) do change: MatchesEager
// compares them with eager's, and this rules out both sides leaving them alone.
TEST(ModelBuffers, InPlaceUpdatesHappen) {
  std::size_t checked = 0;
  for (const ModelCase& model : model_cases()) {
    if (model.mutated_inputs.empty()) continue;
    for (Partition partition : {Partition::kDefault, Partition::kMinCut}) {
      CompiledFunction compiled = aot_function(model.fn, config_for(partition));
      at::manual_seed(7);
      const TensorList before = model.make_inputs();
      at::manual_seed(7);
      TensorList inputs = model.make_inputs();
      compiled(inputs);
      for (std::size_t i : model.mutated_inputs)
        EXPECT_FALSE(at::equal(before[i], inputs[i])) << model.name << ": input " << i << " was not updated in place";
      ++checked;
    }
  }
  EXPECT_GT(checked, 0u) << "no model updates a buffer in place";
}

INSTANTIATE_TEST_SUITE_P(Models, ModelTest, ::testing::ValuesIn(params_of(model_cases())), param_name);

// ================================== metadata corpus ==================================
// Programs PyTorch's aot_function refuses too (python_aot_function_probe.py beside this file runs
// the Python twins of the corpus through functorch.compile.aot_function): the compile must fail
// naming the reason, never silently do something else.
struct Refusal {
  std::string message;  // a substring of aotpipe's error
  std::string why;
};
constexpr const char* kSetWithOtherMutations =
    "an input received set_() (a storage mutation) together with other mutations that cannot be kept in the graph";
const std::map<std::string, Refusal>& refused_cases() {
  static const std::map<std::string, Refusal> refused{
      {"set__input_mutation_no_keep",
       {kSetWithOtherMutations,
        "a set_() on a graph input can only be kept in the graph (keep_input_mutations); without it PyTorch "
        "raises 'Encountered a set_ on a graph input, but the input has other mutations that we cannot keep in "
        "the graph' already in the metadata analysis"}},
      {"set__and_data_mutation_good",
       {kSetWithOtherMutations,
        "PyTorch's aot_function raises the same AssertionError ('Encountered a set_ on a graph input, but the "
        "input has other mutations that we cannot keep in the graph') when compiling it: the later data "
        "mutation of b reaches a's new storage, which the graph cannot keep"}},
  };
  return refused;
}

// Programs on which PyTorch's aot_function differs from eager too, the same way (python_aot_function_probe.py
// --compare shows it): the comparison with eager must fail with exactly these messages, so the
// divergence is asserted, not skipped, and a change in it is noticed.
struct SharedDivergence {
  std::vector<std::string> failures;  // each a substring of an expected failure of expect_matches_eager
  std::string why;
};
const std::map<std::string, SharedDivergence>& shared_divergences() {
  static const std::map<std::string, SharedDivergence> divergences{
      {"input_output_view_mutate_multiple",
       {{"gradient 2 definedness"},
        "a.mul_(2) on an input no output depends on: eager autograd gives a's leaf no gradient (None); the "
        "compiled autograd Function returns the mutated a among its outputs and its backward a zero gradient "
        "for it, as PyTorch's CompiledFunction does (gradient 2 is a's leaf: eager_check collects the leaves "
        "of non-leaf inputs last first)"}},
      {"set__input_mutation",
       {{"gradient 0 definedness"},
        "a.set_(b) under no_grad to an intermediate b, then a * b: eager autograd still routes a gradient to the "
        "leaf a (its tensor now holds b's data); the graph keeps the set_ (keep_input_mutations) and computes "
        "the output from b, which does not depend on a, so a gets none, as in PyTorch's aot_function"}},
  };
  return divergences;
}

// Runs a corpus function with the case's grad mode, and records the grad mode the call left
// behind (a case may flip it; the compiled function must leave it the same way).
struct GradModeCall {
  bool grad_enabled;
  std::optional<bool>* grad_mode_after;
  std::function<TensorList(const TensorList&)> fn;
  TensorList operator()(const TensorList& args) const {
    at::AutoGradMode mode(grad_enabled);
    TensorList out = fn(args);
    *grad_mode_after = at::GradMode::is_enabled();
    // A view whose base was later modified in place by an op that requires grad gets its grad_fn
    // regenerated lazily, on the first grad_fn() call; C++'s is_leaf() reads the field without
    // regenerating (Python's is_leaf goes through grad_fn). Observe outputs as Python does.
    for (const at::Tensor& o : out)
      if (o.defined()) (void)o.grad_fn();
    return out;
  }
};

void expect_matches_eager_under_grad_mode(const MetadataCase& c, const CompiledFunction& compiled,
                                          const std::string& label) {
  std::optional<bool> eager_mode_after, compiled_mode_after;
  expect_matches_eager(GradModeCall{c.grad_enabled, &eager_mode_after, c.fn},
                       GradModeCall{c.grad_enabled, &compiled_mode_after, compiled}, on_test_device(c.make_inputs),
                       label);
  EXPECT_EQ(eager_mode_after, compiled_mode_after) << label << ": grad mode left behind by the call";
}

class CorpusTest : public ::testing::TestWithParam<std::tuple<std::string, Partition>> {};

TEST_P(CorpusTest, MatchesEager) {
  const auto& [name, partition] = GetParam();
  const MetadataCase* c = find_metadata_case(name);
  ASSERT_NE(c, nullptr) << "no corpus case " << name;
  CompiledFunction compiled = aot_function(c->fn, config_for(partition, c->keep_input_mutations));
  if (const DeviceExpectation* expected = expected_failure_on_test_device(name)) {
    expect_device_failure(name, *expected, c->fn, compiled, on_test_device(c->make_inputs));
    return;
  }

  if (auto refusal = refused_cases().find(name); refusal != refused_cases().end()) {
    TensorList inputs = on_test_device(c->make_inputs());
    try {
      at::AutoGradMode mode(c->grad_enabled);
      compiled(inputs);
      FAIL() << name << " compiled, but is expected to be refused: " << refusal->second.why;
    } catch (const std::exception& e) {
      EXPECT_THAT(e.what(), ::testing::HasSubstr(refusal->second.message)) << refusal->second.why;
    }
    return;
  }

  const auto divergence = shared_divergences().find(name);
  for (const char* call : {"first call", "second call"}) {
    const std::string label = name + " (" + call + ")";
    if (divergence == shared_divergences().end()) {
      expect_matches_eager_under_grad_mode(*c, compiled, label);
      continue;
    }
    ::testing::TestPartResultArray failures;
    {
      ::testing::ScopedFakeTestPartResultReporter capture(
          ::testing::ScopedFakeTestPartResultReporter::INTERCEPT_ONLY_CURRENT_THREAD, &failures);
      expect_matches_eager_under_grad_mode(*c, compiled, label);
    }
    const std::vector<std::string>& expected = divergence->second.failures;
    std::vector<bool> seen(expected.size(), false);
    for (int i = 0; i < failures.size(); ++i) {
      const std::string message = failures.GetTestPartResult(i).message();
      bool known = false;
      for (std::size_t k = 0; k < expected.size(); ++k)
        if (message.find(expected[k]) != std::string::npos) known = seen[k] = true;
      EXPECT_TRUE(known) << label << ": a difference from eager beyond the one PyTorch shares ("
                         << divergence->second.why << "):\n"
                         << message;
    }
    for (std::size_t k = 0; k < expected.size(); ++k)
      EXPECT_TRUE(seen[k]) << label << ": no longer differs from eager by '" << expected[k]
                           << "': remove it from shared_divergences()";
  }
  EXPECT_EQ(compiled.num_compiled(), 1u) << "the second call with the same signature recompiled";
}

INSTANTIATE_TEST_SUITE_P(Corpus, CorpusTest, ::testing::ValuesIn(params_of(metadata_corpus())), param_name);

TEST(CorpusCoverage, EveryListedCaseIsInTheCorpus) {
  for (const auto& [name, refusal] : refused_cases())
    EXPECT_NE(find_metadata_case(name), nullptr) << "refused_cases() names " << name << ", not in the corpus";
  for (const auto& [name, divergence] : shared_divergences())
    EXPECT_NE(find_metadata_case(name), nullptr) << "shared_divergences() names " << name << ", not in the corpus";
  EXPECT_GE(metadata_corpus().size(), 102u);
}

}  // namespace
}  // namespace aotpipe::testing
