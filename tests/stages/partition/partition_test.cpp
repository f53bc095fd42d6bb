// The partitioners (stages/partition/): forward + backward graphs computed separately give the
// joint graph's and eager autograd's outputs and gradients; PyTorch's own partitioner tests
// (test/functorch/test_aotdispatch.py, test_min_cut_partitioner*); the flow network's cut; CSE.
// The comparison with PyTorch's partitioners on the same functions is partition_oracle_test.cpp.
#include <aotpipe/graph/interpreter.h>
#include <aotpipe/graph/meta_propagation.h>
#include <aotpipe/tracer/tracer.h>
#include <aotpipe/graph/verifier.h>
#include <aotpipe/stages/partition/cse.h>
#include <aotpipe/stages/partition/default_partition.h>
#include <aotpipe/stages/partition/max_flow.h>
#include <aotpipe/stages/partition/min_cut_partition.h>

#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <torch/csrc/autograd/autograd.h>

#include <algorithm>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <tuple>
#include <unordered_set>

#include "partition_cases.h"
#include "test_support.h"

namespace aotpipe {
namespace {

using partitioners::MinCutOptions;
using testing::PartitionCase;
using testing::tensor_lists_close;

JointGraph joint_of(const PartitionCase& c, TensorList* inputs_out = nullptr) {
  TensorList inputs = c.inputs();
  TraceResult r = trace_joint(c.fn, inputs, {.functionalize = true});
  if (inputs_out) *inputs_out = inputs;
  return JointGraph{std::move(r.graph), inputs.size(), r.num_user_outputs};
}

TensorList detached(const TensorList& xs) {
  TensorList out;
  for (const auto& x : xs) out.push_back(x.detach().clone());
  return out;
}

std::vector<std::string> input_names(const Graph& g) {
  std::vector<std::string> names;
  for (Value* v : g.inputs()) names.push_back(v->name());
  return names;
}

std::vector<std::string> output_names(const Graph& g) {
  std::vector<std::string> names;
  for (Value* v : g.outputs()) names.push_back(v->name());
  return names;
}

const Node* node_defining(const Graph& g, const std::string& name) {
  Value* v = g.find_value(name);
  return v ? v->producer() : nullptr;
}

bool contains(const std::vector<std::string>& xs, const std::string& x) {
  return std::find(xs.begin(), xs.end(), x) != xs.end();
}

std::size_t count_op(const Graph& g, const std::string& qualified_name) {
  std::size_t n = 0;
  for (const Node* node : g.nodes()) n += node->is_call() && node->qualified_name() == qualified_name;
  return n;
}

// The structure every partition must have (the fixed API of partitioner.h).
void expect_well_formed(const JointGraph& joint, const PartitionResult& r) {
  verify(r.forward);
  verify(r.backward);
  const std::size_t num_tangents = joint.graph.num_inputs() - joint.num_primals;
  const std::size_t num_saved = r.saved_values.size();
  ASSERT_EQ(r.num_fwd_outputs, joint.num_fwd_outputs);
  ASSERT_EQ(r.forward.num_inputs(), joint.num_primals);
  ASSERT_EQ(r.forward.num_outputs(), joint.num_fwd_outputs + num_saved);
  ASSERT_EQ(r.backward.num_inputs(), num_saved + num_tangents);
  ASSERT_EQ(r.backward.num_outputs(), joint.graph.num_outputs() - joint.num_fwd_outputs);
  for (std::size_t i = 0; i < joint.num_primals; ++i)
    EXPECT_EQ(r.forward.input(i)->name(), joint.graph.input(i)->name());
  std::vector<std::string> fwd_out = output_names(r.forward), bwd_in = input_names(r.backward);
  int64_t bytes = 0;
  for (std::size_t i = 0; i < num_saved; ++i) {
    EXPECT_EQ(fwd_out[joint.num_fwd_outputs + i], r.saved_values[i]);
    EXPECT_EQ(bwd_in[i], r.saved_values[i]);
    Value* v = r.forward.outputs()[joint.num_fwd_outputs + i];
    if (v->is_tensor()) bytes += v->meta()->nbytes();
  }
  EXPECT_EQ(bytes, r.saved_bytes);
  for (std::size_t i = 0; i < num_tangents; ++i)
    EXPECT_EQ(bwd_in[num_saved + i], joint.graph.input(joint.num_primals + i)->name());
  // Values keep their names and TensorMeta.
  for (const Graph* g : {&r.forward, &r.backward}) {
    auto check = [&](Value* v) {
      Value* original = joint.graph.find_value(v->name());
      if (!original) return;  // a result renamed because its name is a backward input
      ASSERT_EQ(v->meta() != nullptr, original->meta() != nullptr) << v->name();
      if (v->meta()) EXPECT_EQ(*v->meta(), *original->meta()) << g->name() << ": %" << v->name();
    };
    for (Value* v : g->inputs()) check(v);
    for (const Node* n : g->nodes())
      for (Value* v : n->outputs()) check(v);
  }
}

struct Runs {
  TensorList outputs;  // forward outputs then gradients
};

// fn eagerly + torch::autograd::grad with `tangents`.
TensorList eager(const PartitionCase& c, const TensorList& inputs, const TensorList& tangents) {
  TensorList xs;
  for (const auto& x : inputs) xs.push_back(x.detach().clone().requires_grad_(x.requires_grad()));
  if (c.random) at::manual_seed(42);
  TensorList outs = c.fn(xs);
  TensorList diff, grad_inputs;
  for (const auto& o : outs)
    if (o.requires_grad()) diff.push_back(o);
  for (const auto& x : xs)
    if (x.requires_grad()) grad_inputs.push_back(x);
  TensorList grads = torch::autograd::grad(diff, grad_inputs, tangents, false, false, true);
  TensorList result = detached(outs);
  for (std::size_t i = 0; i < grads.size(); ++i)
    result.push_back(grads[i].defined() ? grads[i].detach() : at::zeros_like(grad_inputs[i]).detach());
  return result;
}

class PartitionNumerics : public ::testing::TestWithParam<std::tuple<std::size_t, bool>> {};

TEST_P(PartitionNumerics, ForwardThenBackwardEqualsJointAndEager) {
  auto [index, min_cut] = GetParam();
  const PartitionCase& c = testing::partition_cases()[index];
  TensorList inputs;
  JointGraph joint = joint_of(c, &inputs);
  verify(joint.graph);
  PartitionResult r =
      min_cut ? partitioners::min_cut_rematerialization_partition()(joint) : partitioners::default_partition()(joint);
  expect_well_formed(joint, r);
  SCOPED_TRACE(r.forward.to_string() + "\n" + r.backward.to_string());

  TensorList tangents;
  for (std::size_t i = joint.num_primals; i < joint.graph.num_inputs(); ++i) {
    at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(99 + i);
    tangents.push_back(testing::make_tensor(*joint.graph.input(i)->meta(), gen));
  }
  TensorList joint_in = detached(inputs);
  joint_in.insert(joint_in.end(), tangents.begin(), tangents.end());
  if (c.random) at::manual_seed(42);
  TensorList expected = Interpreter(joint.graph, {.check_meta = true}).run(joint_in);

  if (c.random) at::manual_seed(42);
  TensorList fwd = Interpreter(r.forward, {.check_meta = true}).run(detached(inputs));
  ASSERT_EQ(fwd.size(), r.num_fwd_outputs + r.saved_values.size());
  TensorList bwd_in(fwd.begin() + static_cast<std::ptrdiff_t>(r.num_fwd_outputs), fwd.end());
  bwd_in.insert(bwd_in.end(), tangents.begin(), tangents.end());
  TensorList grads = Interpreter(r.backward, {.check_meta = true}).run(bwd_in);
  TensorList actual(fwd.begin(), fwd.begin() + static_cast<std::ptrdiff_t>(r.num_fwd_outputs));
  actual.insert(actual.end(), grads.begin(), grads.end());
  EXPECT_TRUE(tensor_lists_close(expected, actual, 1e-5, 1e-5));

  TensorList reference = eager(c, inputs, tangents);
  // The joint returns a gradient per input that requires grad.
  EXPECT_TRUE(tensor_lists_close(reference, actual, 1e-4, 1e-4));
}

std::string numerics_name(const ::testing::TestParamInfo<PartitionNumerics::ParamType>& info) {
  auto [index, min_cut] = info.param;
  return testing::partition_cases()[index].name + (min_cut ? "_min_cut" : "_default");
}

INSTANTIATE_TEST_SUITE_P(Cases, PartitionNumerics,
                         ::testing::Combine(::testing::Range<std::size_t>(0, testing::partition_cases().size()),
                                            ::testing::Bool()),
                         numerics_name);

// Recomputed forward nodes sit just before their first use: no node of the backward proper
// (one that depends on a tangent) runs between a recomputed node and its first reader
// (reordering_to_mimic_autograd_engine), and recomputation is not hoisted to the top.
// The order checked is the autograd engine's, before any reordering for peak memory.
TEST(MinCutPartition, RecomputedNodesAreJustBeforeTheirFirstUse) {
  for (const char* name : {"cos3", "layer_norm_ish", "sin_chain", "partial_grad", "mul3"}) {
    JointGraph joint = joint_of(testing::partition_case(name));
    PartitionResult r = partitioners::min_cut_rematerialization_partition({.reorder_for_peak_memory = false})(joint);
    ASSERT_FALSE(r.recomputed.empty()) << name;
    std::unordered_set<const Node*> recomputed;
    for (const Node* n : r.backward.nodes())
      if (n->is_call() && contains(r.recomputed, n->label())) recomputed.insert(n);
    ASSERT_EQ(recomputed.size(), r.recomputed.size()) << name;
    // Nodes that depend on the tangents: the backward proper.
    std::unordered_set<const Value*> from_tangents;
    for (std::size_t t = r.saved_values.size(); t < r.backward.num_inputs(); ++t)
      from_tangents.insert(r.backward.input(t));
    std::unordered_set<const Node*> backward_proper;
    for (const Node* n : r.backward.nodes()) {
      bool dep = false;
      for (Value* v : n->inputs()) dep = dep || from_tangents.count(v);
      if (!dep) continue;
      backward_proper.insert(n);
      for (Value* v : n->outputs()) from_tangents.insert(v);
    }
    auto nodes = r.backward.nodes();
    // layer_norm_ish's backward starts with sum(tangents) before recomputing sub and div.
    if (std::string(name) == "layer_norm_ish") EXPECT_TRUE(backward_proper.count(nodes[0])) << r.backward;
    for (std::size_t i = 0; i < nodes.size(); ++i) {
      if (!recomputed.count(nodes[i])) continue;
      std::size_t first_use = nodes.size();
      for (std::size_t j = i + 1; j < nodes.size() && first_use == nodes.size(); ++j)
        for (Value* v : nodes[j]->inputs())
          if (v->producer() == nodes[i]) first_use = j;
      ASSERT_LT(first_use, nodes.size()) << name << ": " << nodes[i]->label() << " is unused\n" << r.backward;
      for (std::size_t j = i + 1; j < first_use; ++j)
        EXPECT_FALSE(backward_proper.count(nodes[j]))
            << name << ": " << nodes[j]->label() << " sits between " << nodes[i]->label() << " and its first use\n"
            << r.backward;
    }
  }
}

// --- PyTorch's test_min_cut_partitioner* (test/functorch/test_aotdispatch.py) ---

TEST(MinCutPartition, CosCosCosSavesOnlyTheInput) {
  JointGraph joint = joint_of(testing::partition_case("cos3"));
  PartitionResult r = partitioners::min_cut_rematerialization_partition()(joint);
  // get_num_ins_outs(fw_graph) == (1, 2), get_num_ins_outs(bw_graph) == (2, 1)
  EXPECT_EQ(r.forward.num_inputs(), 1u);
  EXPECT_EQ(r.forward.num_outputs(), 2u);
  EXPECT_EQ(r.backward.num_inputs(), 2u);
  EXPECT_EQ(r.backward.num_outputs(), 1u);
  EXPECT_EQ(r.saved_values, std::vector<std::string>{"primals_1"});
  EXPECT_EQ(count_op(r.backward, "aten::cos"), 2u) << r.backward;  // cos, cos_1 recomputed; cos_2 is not needed
  PartitionResult d = partitioners::default_partition()(joint);
  EXPECT_EQ(d.saved_values, (std::vector<std::string>{"primals_1", "cos", "cos_1"}));
}

TEST(MinCutPartition, FourInputSumThenCosCos) {
  JointGraph joint = joint_of(testing::partition_case("add4_cos2"));
  PartitionResult r = partitioners::min_cut_rematerialization_partition()(joint);
  // (4, 2) and (2, 4): the sum a+b+c+d is saved, the cos recomputed.
  EXPECT_EQ(r.forward.num_inputs(), 4u);
  EXPECT_EQ(r.forward.num_outputs(), 2u);
  EXPECT_EQ(r.backward.num_inputs(), 2u);
  EXPECT_EQ(r.backward.num_outputs(), 4u);
  ASSERT_EQ(r.saved_values.size(), 1u);
  EXPECT_EQ(node_defining(joint.graph, r.saved_values[0])->qualified_name(), "aten::add.Tensor");
}

TEST(MinCutPartition, MatmulIsSavedTanhRecomputed) {
  JointGraph joint = joint_of(testing::partition_case("mm_tanh"));
  PartitionResult r = partitioners::min_cut_rematerialization_partition()(joint);
  // outs[1].target == aten.mm: the mm result is the first saved value; mm is never recomputed.
  ASSERT_GE(r.forward.num_outputs(), 2u);
  EXPECT_EQ(r.forward.outputs()[1]->producer()->qualified_name(), "aten::mm") << r.forward;
  EXPECT_EQ(count_op(r.backward, "aten::mm"), 1u) << r.backward;    // only the backward's own mm
  EXPECT_EQ(count_op(r.backward, "aten::tanh"), 1u) << r.backward;  // tanh = tanh(mm) recomputed
}

TEST(MinCutPartition, RecomputableOpsDecideWhetherMulIsRecomputed) {
  JointGraph joint = joint_of(testing::partition_case("mul3"));
  // recomputable_ops = []: mul must be saved. fw (1, 3): outputs mul_1, primals_1, mul.
  MinCutOptions none;
  none.recomputable_ops = std::set<std::string>{};
  PartitionResult r = partitioners::min_cut_rematerialization_partition(none)(joint);
  EXPECT_EQ(r.forward.num_inputs(), 1u);
  EXPECT_EQ(r.forward.num_outputs(), 3u);
  EXPECT_EQ(r.backward.num_inputs(), 3u);
  EXPECT_EQ(r.backward.num_outputs(), 1u);
  EXPECT_EQ(r.saved_values, (std::vector<std::string>{"primals_1", "mul"}));
  EXPECT_TRUE(r.recomputed.empty());
  // recomputable_ops = [aten.mul]: only the input is saved, mul recomputed. fw (1, 2), bw (2, 1).
  MinCutOptions mul_only;
  mul_only.recomputable_ops = std::set<std::string>{"aten::mul"};
  r = partitioners::min_cut_rematerialization_partition(mul_only)(joint);
  EXPECT_EQ(r.forward.num_outputs(), 2u);
  EXPECT_EQ(r.backward.num_inputs(), 2u);
  EXPECT_EQ(r.saved_values, std::vector<std::string>{"primals_1"});
  EXPECT_EQ(r.recomputed, std::vector<std::string>{"%mul = aten::mul.Tensor"});
  // PyTorch's default list has mul.
  r = partitioners::min_cut_rematerialization_partition()(joint);
  EXPECT_EQ(r.saved_values, std::vector<std::string>{"primals_1"});
}

TEST(MinCutPartition, NeverSavesMoreThanTheDefaultPartition) {
  for (const auto& c : testing::partition_cases()) {
    JointGraph joint = joint_of(c);
    PartitionResult m = partitioners::min_cut_rematerialization_partition()(joint);
    PartitionResult d = partitioners::default_partition()(joint);
    EXPECT_LE(m.saved_bytes, d.saved_bytes) << c.name;
  }
}

// --- what is banned from recomputation ---

TEST(MinCutPartition, ComputeIntensiveAndRandomOpsAreNeverRecomputed) {
  for (const char* name : {"mlp", "conv_relu", "gelu_chain", "mm_tanh", "dropout_mul"}) {
    JointGraph joint = joint_of(testing::partition_case(name));
    PartitionResult r = partitioners::min_cut_rematerialization_partition()(joint);
    for (const std::string& label : r.recomputed)
      for (const char* op : {"aten::mm", "aten::convolution", "aten::native_dropout", "aten::addmm"})
        EXPECT_EQ(label.find(std::string("= ") + op), std::string::npos) << name << ": " << label;
  }
  JointGraph joint = joint_of(testing::partition_case("dropout_mul"));
  PartitionResult r = partitioners::min_cut_rematerialization_partition()(joint);
  EXPECT_EQ(count_op(r.backward, "aten::native_dropout"), 0u) << r.backward;
}

TEST(MinCutPartition, ReductionsThatShrinkMoreThanFourTimesAreSaved) {
  // mean over 8 columns: [4, 8] -> [4, 1]; the backward needs it and cannot recompute it.
  JointGraph joint = joint_of(testing::partition_case("layer_norm_ish"));
  PartitionResult r = partitioners::min_cut_rematerialization_partition()(joint);
  EXPECT_TRUE(contains(r.saved_values, "mean")) << r.forward;
  MinCutOptions allow;
  allow.ban_recompute_reductions = false;
  PartitionResult a = partitioners::min_cut_rematerialization_partition(allow)(joint);
  EXPECT_FALSE(contains(a.saved_values, "mean")) << a.forward;
}

TEST(MinCutPartition, ExtraRecomputableOpsMakeMatmulRecomputable) {
  // mm(x, w).cos(): the backward needs mm (for sin) and x, w (for the matmul gradients). mm is
  // compute-intensive and outside the allowlist, so it is saved; made recomputable, it is
  // recomputed from x and w, which are saved anyway.
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(3);
  TensorList inputs{at::randn({4, 8}, gen).requires_grad_(), at::randn({8, 16}, gen).requires_grad_()};
  TraceResult t = trace_joint([](const TensorList& a) { return TensorList{at::mm(a[0], a[1]).cos()}; }, inputs,
                              {.functionalize = true});
  JointGraph joint{t.graph, 2, t.num_user_outputs};
  PartitionResult plain = partitioners::min_cut_rematerialization_partition()(joint);
  EXPECT_TRUE(contains(plain.saved_values, "mm")) << plain.forward;
  MinCutOptions options;
  options.extra_recomputable_ops = {"aten::mm"};
  PartitionResult r = partitioners::min_cut_rematerialization_partition(options)(joint);
  expect_well_formed(joint, r);
  EXPECT_FALSE(contains(r.saved_values, "mm")) << r.forward;
  EXPECT_EQ(r.saved_bytes, plain.saved_bytes - 4 * 16 * 4);
  EXPECT_EQ(count_op(r.backward, "aten::mm"), 3u) << r.backward;  // the forward's mm + two gradients
  EXPECT_TRUE(contains(r.recomputed, "%mm = aten::mm")) << r.backward;
}

TEST(MinCutPartition, ViewsAreSavedAsPyTorchDoesUnlessRecomputeViews) {
  JointGraph joint = joint_of(testing::partition_case("mlp"));
  // Default (recompute_views = False): the transposed weights t(w) are saved, as PyTorch does.
  PartitionResult r = partitioners::min_cut_rematerialization_partition()(joint);
  EXPECT_EQ(r.saved_values, (std::vector<std::string>{"relu", "t_1", "t_2", "t_3"}));
  // recompute_views: views are never saved; their bases are, and the views are recomputed.
  MinCutOptions options;
  options.recompute_views = true;
  PartitionResult v = partitioners::min_cut_rematerialization_partition(options)(joint);
  for (const std::string& s : v.saved_values)
    EXPECT_NE(node_defining(joint.graph, s) ? node_defining(joint.graph, s)->qualified_name() : "", "aten::t") << s;
  EXPECT_EQ(v.saved_values, (std::vector<std::string>{"primals_1", "primals_2", "primals_4", "relu"}));
  EXPECT_EQ(v.saved_bytes, r.saved_bytes);
  // default_partition saves views of forward values as they are (PyTorch saves `t` nodes too).
  PartitionResult g = partitioners::default_partition()(joint_of(testing::partition_case("gelu_chain")));
  EXPECT_EQ(g.saved_values, (std::vector<std::string>{"primals_1", "primals_2", "mm", "add", "mm_1", "add_1", "mm_2"}));
}

TEST(MinCutPartition, LongFusibleChainsAreCutEveryHundredOps) {
  JointGraph joint = joint_of(testing::partition_case("sin_chain"));
  PartitionResult r = partitioners::min_cut_rematerialization_partition()(joint);
  EXPECT_EQ(r.saved_values, (std::vector<std::string>{"primals_1", "sin_101", "sin_203"}));
  MinCutOptions options;
  options.ban_recompute_long_fusible_chains = false;
  PartitionResult free = partitioners::min_cut_rematerialization_partition(options)(joint);
  EXPECT_EQ(free.saved_values, std::vector<std::string>{"primals_1"});
}

TEST(MinCutPartition, MultiOutputOpsSaveResultsOneByOne) {
  JointGraph joint = joint_of(testing::partition_case("layer_norm"));
  PartitionResult r = partitioners::min_cut_rematerialization_partition()(joint);
  // native_layer_norm's mean and rstd, not its normalized output.
  EXPECT_EQ(r.saved_values, (std::vector<std::string>{"primals_1", "primals_2", "primals_3", "native_layer_norm_1",
                                                      "native_layer_norm_2"}));
}

TEST(MinCutPartition, AlgorithmsAgree) {
  for (const auto& c : testing::partition_cases()) {
    JointGraph joint = joint_of(c);
    std::vector<std::string> reference;
    for (auto algorithm : {partitioners::MaxFlowAlgorithm::BoykovKolmogorov,
                           partitioners::MaxFlowAlgorithm::PushRelabel, partitioners::MaxFlowAlgorithm::EdmondsKarp}) {
      MinCutOptions options;
      options.algorithm = algorithm;
      PartitionResult r = partitioners::min_cut_rematerialization_partition(options)(joint);
      if (algorithm == partitioners::MaxFlowAlgorithm::BoykovKolmogorov) reference = r.saved_values;
      EXPECT_EQ(r.saved_values, reference) << c.name << " " << partitioners::to_string(algorithm);
    }
  }
}

// Ordering for peak memory: the backward frees what the runtime hands over (saved intermediates,
// tangents) and not what someone else holds (a saved primal), the estimate never rises, and both
// partitioners save the same values with it as without it.
TEST(Partitioners, GraphsAreOrderedForPeakMemory) {
  std::size_t reordered = 0;
  for (const auto& c : testing::partition_cases()) {
    JointGraph joint = joint_of(c);
    for (bool min_cut : {true, false}) {
      const Partitioner partition =
          min_cut ? partitioners::min_cut_rematerialization_partition() : partitioners::default_partition();
      PartitionResult r = partition(joint);
      const std::string what = c.name + (min_cut ? " min_cut" : " default");
      ASSERT_EQ(r.backward_input_lifetimes.size(), r.backward.num_inputs()) << what;
      for (std::size_t i = 0; i < r.backward.num_inputs(); ++i) {
        const Value* in = r.backward.input(i);
        const bool primal = in->name().rfind("primals_", 0) == 0;
        if (primal || i >= r.saved_values.size())
          EXPECT_EQ(r.backward_input_lifetimes[i],
                    primal ? InputLifetime::HeldByCaller : InputLifetime::FreedAfterLastUse)
              << what << " %" << in->name();
      }
      for (const auto& [graph, schedule, lifetimes] :
           {std::tuple{&r.forward, r.forward_schedule, std::vector<InputLifetime>(r.forward.num_inputs())},
            std::tuple{&r.backward, r.backward_schedule, r.backward_input_lifetimes}}) {
        EXPECT_LE(schedule.peak_after, schedule.peak_before) << what;
        EXPECT_EQ(estimate_peak_bytes(*graph, lifetimes), schedule.peak_after) << what;
        reordered += schedule.method == ScheduleMethod::LeastPeakMemoryFirst;
      }
      if (min_cut) {
        PartitionResult unordered =
            partitioners::min_cut_rematerialization_partition({.reorder_for_peak_memory = false})(joint);
        EXPECT_EQ(unordered.saved_values, r.saved_values) << what;
        EXPECT_EQ(unordered.backward.num_nodes(), r.backward.num_nodes()) << what;
      }
    }
  }
  EXPECT_GT(reordered, 0u);
}

TEST(MinCutPartition, GradientThatIgnoresTheTangents) {
  // d/dx of (sin(x), 0 * x) with the second output not differentiable: the gradient input is
  // zeros_like(x), needed by the backward but not by the forward. Saving x or zeros_like costs
  // the same; ties go to the value nearest the backward (networkx's cut), as in PyTorch.
  Graph g("joint");
  Value* x = g.add_input("primals_1", TensorMeta::contiguous({3}));
  g.add_input("tangents_1", TensorMeta::contiguous({3}));
  Value* y = g.add_call("aten::sin", {x})->output();
  Value* zero = g.add_call("aten::zeros_like", {x})->output();
  g.set_outputs({y, zero});
  propagate_meta(g);
  JointGraph joint{g, 1, 1};
  PartitionResult r = partitioners::min_cut_rematerialization_partition()(joint);
  expect_well_formed(joint, r);
  EXPECT_EQ(r.saved_values, std::vector<std::string>{"zeros_like"});
}

TEST(MinCutPartition, NoBackwardFallsBackToDefault) {
  // No tangents and no backward outputs: nothing for the backward to need (PyTorch hands such
  // graphs to default_partition).
  Graph g("joint");
  Value* x = g.add_input("primals_1", TensorMeta::contiguous({3}));
  g.set_outputs({g.add_call("aten::sin", {x})->output()});
  propagate_meta(g);
  JointGraph joint{g, 1, 1};
  PartitionResult r = partitioners::min_cut_rematerialization_partition()(joint);
  expect_well_formed(joint, r);
  EXPECT_TRUE(r.saved_values.empty());
  EXPECT_EQ(r.backward.num_nodes(), 0u);
  EXPECT_EQ(count_op(r.forward, "aten::sin"), 1u);
}

TEST(Partitioners, RejectForwardOutputsThatNeedTangents) {
  Graph g("joint");
  Value* x = g.add_input("primals_1", TensorMeta::contiguous({3}));
  Value* t = g.add_input("tangents_1", TensorMeta::contiguous({3}));
  Value* y = g.add_call("aten::mul.Tensor", {x, t})->output();
  g.set_outputs({y, y});
  propagate_meta(g);
  JointGraph joint{g, 1, 1};
  EXPECT_THROW(partitioners::min_cut_rematerialization_partition()(joint), partitioners::PartitionError);
  EXPECT_THROW(partitioners::default_partition()(joint), partitioners::PartitionError);
  JointGraph bad{g, 3, 1};
  EXPECT_THROW(partitioners::default_partition()(bad), std::invalid_argument);
}

TEST(Partitioners, ThreadsPartitionIndependently) {
  JointGraph joint = joint_of(testing::partition_case("gelu_chain"));
  PartitionResult reference = partitioners::min_cut_rematerialization_partition()(joint);
  std::vector<std::thread> threads;
  std::vector<std::vector<std::string>> saved(8);
  for (std::size_t i = 0; i < saved.size(); ++i)
    threads.emplace_back([&, i] {
      for (int k = 0; k < 5; ++k) saved[i] = partitioners::min_cut_rematerialization_partition()(joint).saved_values;
    });
  for (auto& t : threads) t.join();
  for (const auto& s : saved) EXPECT_EQ(s, reference.saved_values);
}

// An input mutation kept in the graph (AOTAutograd's keep_input_mutations): the tracer appends
// `aten::copy_(input, new value)` at the end of the joint, tagged forward. It stays in the
// forward graph (an op with side effects), never in the backward, under both partitioners.
TEST(Partitioners, KeptInputMutationStaysInTheForward) {
  auto fn = [](const TensorList& a) {
    a[1].add_(1.0);
    return TensorList{(a[0] * a[1]).sin()};
  };
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(5);
  TensorList inputs{at::randn({5}, gen).requires_grad_(), at::randn({5}, gen)};
  TraceOptions options;
  options.functionalize = true;
  options.keep_input_mutations_in_graph = {false, true};
  TraceResult t = trace_joint(fn, inputs, options);
  JointGraph joint{t.graph, 2, t.num_user_outputs};
  ASSERT_EQ(count_op(joint.graph, "aten::copy_"), 1u) << joint.graph;
  at::Tensor tangent = at::randn({5}, gen);
  // The joint on fresh copies: outputs, gradient, and the mutated buffer.
  TensorList joint_in = detached(inputs);
  joint_in.push_back(tangent);
  at::Tensor joint_buffer = joint_in[1];
  TensorList expected = Interpreter(joint.graph).run(joint_in);
  for (bool min_cut : {false, true}) {
    PartitionResult r =
        min_cut ? partitioners::min_cut_rematerialization_partition()(joint) : partitioners::default_partition()(joint);
    expect_well_formed(joint, r);
    EXPECT_EQ(count_op(r.forward, "aten::copy_"), 1u) << r.forward;
    EXPECT_EQ(count_op(r.backward, "aten::copy_"), 0u) << r.backward;
    TensorList fwd_in = detached(inputs);
    at::Tensor buffer = fwd_in[1];
    TensorList fwd = Interpreter(r.forward).run(fwd_in);
    TensorList bwd_in(fwd.begin() + static_cast<std::ptrdiff_t>(r.num_fwd_outputs), fwd.end());
    bwd_in.push_back(tangent);
    TensorList grads = Interpreter(r.backward).run(bwd_in);
    TensorList actual{fwd[0]};
    actual.insert(actual.end(), grads.begin(), grads.end());
    EXPECT_TRUE(tensor_lists_close(expected, actual)) << r.forward << r.backward;
    EXPECT_TRUE(testing::tensors_close(joint_buffer, buffer));
  }
}

TEST(DefaultPartition, WithoutPhaseTagsUsesDataFlow) {
  JointGraph joint = joint_of(testing::partition_case("cos3"));
  for (Node* n : joint.graph.nodes()) n->attrs().erase("phase");
  PartitionResult r = partitioners::default_partition()(joint);
  expect_well_formed(joint, r);
  EXPECT_EQ(r.saved_values, (std::vector<std::string>{"primals_1", "cos", "cos_1"}));
}

// --- the flow network ---

TEST(MaxFlow, TiesAreCutNextToTheSinkLikeNetworkx) {
  // source -> a (inf), a -> b (5), b -> c (5), c -> sink (inf): both 5-edges are minimum cuts;
  // networkx (and PyTorch) return the one whose sink side is smallest: b -> c.
  for (auto algorithm : {partitioners::MaxFlowAlgorithm::BoykovKolmogorov, partitioners::MaxFlowAlgorithm::PushRelabel,
                         partitioners::MaxFlowAlgorithm::EdmondsKarp}) {
    partitioners::FlowNetwork net;
    int a = net.add_vertex(), b = net.add_vertex(), c = net.add_vertex();
    net.add_edge(partitioners::FlowNetwork::kSource, a, partitioners::FlowNetwork::kInfinite);
    net.add_edge(a, b, 5);
    net.add_edge(b, c, 5);
    net.add_edge(c, partitioners::FlowNetwork::kSink, partitioners::FlowNetwork::kInfinite);
    partitioners::MinCut cut = partitioners::minimum_cut(net, algorithm);
    EXPECT_EQ(cut.value, 5);
    ASSERT_EQ(cut.cut_edges.size(), 1u);
    EXPECT_EQ(net.edges()[cut.cut_edges[0]].from, b) << partitioners::to_string(algorithm);
    EXPECT_TRUE(cut.sink_side[static_cast<std::size_t>(c)]);
    EXPECT_FALSE(cut.sink_side[static_cast<std::size_t>(b)]);
  }
}

TEST(MaxFlow, AddingAnEdgeTwiceReplacesItsCapacity) {
  partitioners::FlowNetwork net;
  int a = net.add_vertex();
  net.add_edge(partitioners::FlowNetwork::kSource, a, 3);
  net.add_edge(partitioners::FlowNetwork::kSource, a, 7);
  net.add_edge(a, partitioners::FlowNetwork::kSink, 10);
  EXPECT_EQ(net.num_edges(), 2u);
  EXPECT_EQ(partitioners::minimum_cut(net).value, 7);
}

TEST(MaxFlow, NoFiniteCutIsAnError) {
  partitioners::FlowNetwork net;
  int a = net.add_vertex();
  net.add_edge(partitioners::FlowNetwork::kSource, a, partitioners::FlowNetwork::kInfinite);
  net.add_edge(a, partitioners::FlowNetwork::kSink, partitioners::FlowNetwork::kInfinite);
  EXPECT_THROW(partitioners::minimum_cut(net), partitioners::UnboundedFlowError);
}

TEST(MaxFlow, DiamondWithParallelPaths) {
  // Two disjoint paths of capacities (3, 4) and (6, 2): max flow 3 + 2 = 5.
  for (auto algorithm : {partitioners::MaxFlowAlgorithm::BoykovKolmogorov, partitioners::MaxFlowAlgorithm::PushRelabel,
                         partitioners::MaxFlowAlgorithm::EdmondsKarp}) {
    partitioners::FlowNetwork net;
    int a = net.add_vertex(), b = net.add_vertex();
    net.add_edge(partitioners::FlowNetwork::kSource, a, 3);
    net.add_edge(a, partitioners::FlowNetwork::kSink, 4);
    net.add_edge(partitioners::FlowNetwork::kSource, b, 6);
    net.add_edge(b, partitioners::FlowNetwork::kSink, 2);
    net.add_edge(a, b, 1);
    partitioners::MinCut cut = partitioners::minimum_cut(net, algorithm);
    EXPECT_EQ(cut.value, 5) << partitioners::to_string(algorithm);
  }
}

TEST(MinCutPartition, FlowNetworkOfMulMulMul) {
  // build_min_cut_problem: the network the partitioner cuts, with named vertices.
  JointGraph joint = joint_of(testing::partition_case("mul3"));
  partitioners::MinCutProblem p = partitioners::build_min_cut_problem(joint);
  EXPECT_EQ(p.vertex_names[0], "source");
  EXPECT_EQ(p.vertex_names[1], "sink");
  EXPECT_TRUE(contains(p.vertex_names, "mul_in"));
  EXPECT_TRUE(contains(p.banned, "primals_1"));
  partitioners::MinCut cut = partitioners::minimum_cut(p.network);
  ASSERT_EQ(cut.cut_edges.size(), 1u);
  EXPECT_EQ(p.vertex_names[static_cast<std::size_t>(p.network.edges()[cut.cut_edges[0]].from)], "primals_1_in");
}

// --- CSE ---

TEST(Cse, MergesRepeatedCallsButNotRandomOpsOrOutputs) {
  Graph g("g");
  Value* x = g.add_input("x", TensorMeta::contiguous({4}));
  Value* a = g.add_call("aten::sin", {x})->output();
  Value* b = g.add_call("aten::sin", {x})->output();  // = a
  Value* c = g.add_call("aten::add.Tensor", {a, b})->output();
  Value* d = g.add_call("aten::add.Tensor", {b, a})->output();  // different argument order: kept
  Value* s1 = g.add_call("aten::mul.Scalar", {c, 2})->output();
  Value* s2 = g.add_call("aten::mul.Scalar", {c, 2.0})->output();  // 2 vs 2.0: kept (PyTorch hashes types)
  Value* r1 = g.add_call("aten::rand_like", {x})->output();
  Value* r2 = g.add_call("aten::rand_like", {x})->output();  // random: kept
  Value* o1 = g.add_call("aten::cos", {x})->output();
  Value* o2 = g.add_call("aten::cos", {x})->output();  // both are graph outputs: kept
  g.set_outputs({d, s1, s2, r1, r2, o1, o2});
  propagate_meta(g);
  std::size_t merged = 0;
  Graph out = partitioners::eliminate_common_subexpressions(g, &merged);
  verify(out);
  EXPECT_EQ(merged, 1u) << out;
  EXPECT_EQ(out.find_value("sin_1"), nullptr);
  EXPECT_EQ(count_op(out, "aten::rand_like"), 2u);
  EXPECT_EQ(count_op(out, "aten::cos"), 2u);
  EXPECT_EQ(count_op(out, "aten::mul.Scalar"), 2u);
  // Same results.
  at::Tensor input = at::randn({4});
  at::manual_seed(1);
  TensorList e = Interpreter(g).run({input});
  at::manual_seed(1);
  TensorList a2 = Interpreter(out).run({input});
  EXPECT_TRUE(tensor_lists_close(e, a2));
}

// Calls whose results share a graph output's memory are never merged: views by their schemas,
// and _unsafe_view and unsafe_split, whose schemas hide that they are views, alike.
TEST(Cse, ViewsOfAnOutputStayApartHiddenOnesToo) {
  for (const char* op : {"aten::view", "aten::_unsafe_view"}) {
    Graph g("g");
    Value* x = g.add_input("x", TensorMeta::contiguous({2, 2}));
    Value* a = g.add_call("aten::sin", {x})->output();
    Value* v1 = g.add_call(op, {a, std::vector<int64_t>{4}})->output();
    Value* v2 = g.add_call(op, {a, std::vector<int64_t>{4}})->output();
    Value* s = g.add_call("aten::unsafe_split.Tensor", {a, 1}, {OutputSpec{}, OutputSpec{}})->output(0);
    Value* t = g.add_call("aten::unsafe_split.Tensor", {a, 1}, {OutputSpec{}, OutputSpec{}})->output(0);
    g.set_outputs(
        {a, g.add_call("aten::add.Tensor", {v1, v2})->output(), g.add_call("aten::mul.Tensor", {s, t})->output()});
    propagate_meta(g);
    std::size_t merged = 7;
    Graph out = partitioners::eliminate_common_subexpressions(g, &merged);
    verify(out);
    EXPECT_EQ(merged, 0u) << op << "\n" << out;
  }
}

// split's results alias `self` through the list's element annotation (Tensor(a)[]): of an output,
// they stay apart as views do (CSE's storage classes once read only the list's own alias set).
TEST(Cse, SplitsOfAnOutputStayApart) {
  Graph g("g");
  Value* x = g.add_input("x", TensorMeta::contiguous({2, 2}));
  Value* a = g.add_call("aten::sin", {x})->output();
  Value* s = g.add_call("aten::split.Tensor", {a, 1}, {OutputSpec{}, OutputSpec{}})->output(0);
  Value* t = g.add_call("aten::split.Tensor", {a, 1}, {OutputSpec{}, OutputSpec{}})->output(0);
  g.set_outputs({a, g.add_call("aten::mul.Tensor", {s, t})->output()});
  propagate_meta(g);
  std::size_t merged = 7;
  Graph out = partitioners::eliminate_common_subexpressions(g, &merged);
  verify(out);
  EXPECT_EQ(merged, 0u) << out;
}

// A repeat of a repeat merges too: the second cos reads the sin that replaced its argument.
TEST(Cse, ChainsOfRepeatsMergeThroughTheirReplacedArguments) {
  Graph g("g");
  Value* x = g.add_input("x", TensorMeta::contiguous({4}));
  Value* a = g.add_call("aten::sin", {x})->output();
  Value* b = g.add_call("aten::sin", {x})->output();
  Value* ca = g.add_call("aten::cos", {a})->output();
  Value* cb = g.add_call("aten::cos", {b})->output();
  g.set_outputs({g.add_call("aten::add.Tensor", {ca, cb})->output()});
  propagate_meta(g);
  std::size_t merged = 0;
  Graph out = partitioners::eliminate_common_subexpressions(g, &merged);
  verify(out);
  EXPECT_EQ(merged, 2u) << out;
  EXPECT_EQ(count_op(out, "aten::sin"), 1u);
  EXPECT_EQ(count_op(out, "aten::cos"), 1u);
  at::Tensor input = at::randn({4});
  EXPECT_TRUE(tensor_lists_close(Interpreter(g).run({input}), Interpreter(out).run({input})));
}

// The partitioner's form: nothing when the copy would be the same graph, else the same copy.
TEST(Cse, IfAnyReturnsNothingForAGraphItWouldNotChange) {
  Graph unchanged("g");
  Value* x = unchanged.add_input("x", TensorMeta::contiguous({4}));
  Value* s = unchanged.add_call("aten::sin", {x})->output();
  unchanged.set_outputs({unchanged.add_call("aten::cos", {s})->output()});
  propagate_meta(unchanged);
  std::size_t merged = 7;
  EXPECT_FALSE(partitioners::eliminate_common_subexpressions_if_any(unchanged, &merged).has_value());
  EXPECT_EQ(merged, 0u);

  Graph repeated("g");
  Value* y = repeated.add_input("y", TensorMeta::contiguous({4}));
  Value* a = repeated.add_call("aten::sin", {y})->output();
  Value* b = repeated.add_call("aten::sin", {y})->output();
  repeated.set_outputs({repeated.add_call("aten::add.Tensor", {a, b})->output()});
  propagate_meta(repeated);
  std::optional<Graph> merged_copy = partitioners::eliminate_common_subexpressions_if_any(repeated, &merged);
  ASSERT_TRUE(merged_copy.has_value());
  EXPECT_EQ(merged, 1u);
  EXPECT_EQ(merged_copy->to_string(), partitioners::eliminate_common_subexpressions(repeated).to_string());

  Graph dead("g");
  Value* z = dead.add_input("z", TensorMeta::contiguous({4}));
  dead.add_call("aten::exp", {z});  // read by nothing
  dead.set_outputs({dead.add_call("aten::sin", {z})->output()});
  propagate_meta(dead);
  std::optional<Graph> live_copy = partitioners::eliminate_common_subexpressions_if_any(dead, &merged);
  ASSERT_TRUE(live_copy.has_value());
  EXPECT_EQ(merged, 0u);
  EXPECT_EQ(count_op(*live_copy, "aten::exp"), 0u);
}

}  // namespace
}  // namespace aotpipe
