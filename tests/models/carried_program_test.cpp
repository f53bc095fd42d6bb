// The metadata stage's trace carried on into the joint stage's program (stages/joint/
// carried_program.h): for every model, zoo block and metadata-corpus case, the analysis equals
// collect_metadata's alone, and the program the joint stage takes from the metadata stage is the
// program it would trace itself (the same graph up to value names, gradients' inputs, undefined
// gradients and CPU-fallback counts). A function rewritten between the stages is traced afresh.
#include <aotpipe/graph/example_tensor.h>
#include <aotpipe/graph/printer.h>
#include <aotpipe/driver/aot_function.h>
#include <aotpipe/stages/dedupe/dedupe.h>
#include <aotpipe/stages/joint/carried_program.h>
#include <aotpipe/stages/joint/joint.h>
#include <aotpipe/stages/metadata/metadata_stage.h>
#include <aotpipe/stages/synthetic_base/synthetic_base.h>

#include <model_zoo.h>

#include "metadata_corpus.h"
#include "models.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace aotpipe::testing {
namespace {

struct Case {
  std::string name;
  Function fn;
  std::function<TensorList()> make_inputs;
  bool keep_input_mutations = false;
  bool grad_enabled = true;
};

std::vector<Case> all_cases() {
  std::vector<Case> cases;
  for (const ModelCase& m : model_cases()) cases.push_back({"model_" + m.name, m.fn, m.make_inputs});
  for (const MetadataCase& m : metadata_corpus())
    cases.push_back({"corpus_" + m.name, m.fn, m.make_inputs, m.keep_input_mutations, m.grad_enabled});
  for (zoo::ZooModel& m : zoo::all_models(2)) {
    auto metas = m.inputs;
    cases.push_back({"zoo_" + m.name, m.fn, [metas] {
                       TensorList args;
                       for (const TensorMeta& meta : metas) args.push_back(metadata_example(meta));
                       return args;
                     }});
  }
  return cases;
}

const std::vector<Case>& cases() {
  static const std::vector<Case> all = all_cases();
  return all;
}

std::vector<std::string> case_names() {
  std::vector<std::string> names;
  for (const Case& c : cases()) names.push_back(c.name);
  return names;
}

const Case& case_named(const std::string& name) {
  for (const Case& c : cases())
    if (c.name == name) return c;
  throw std::invalid_argument(name);
}

// Names normalized: the two traces may record a different number of dead views (autograd
// regenerates a stale view's grad_fn by replaying the view, and the analysis asks for grad_fn
// earlier than the joint does), which shifts the counters of later names.
std::string program_text(const TracedProgram& p) {
  return p.training() ? "joint " + p.joint->graph.name() + "\n" + print_graph_canonical(p.joint->graph)
                      : "inference " + p.inference_graph->name() + "\n" + print_graph_canonical(*p.inference_graph);
}

// The view replays, names normalized (the replay's input is named after the trace's input, which
// a joint trace calls primals_1 and collect_metadata's arg0).
std::vector<std::string> view_replays(const ViewAndMutationMeta& meta) {
  std::vector<std::string> replays;
  for (const OutputAliasInfo& out : meta.output_info)
    replays.push_back(out.view_replay ? print_graph_canonical(out.view_replay->graph()) : "none");
  return replays;
}

// The message of what `f` throws; empty when it returns.
std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::exception& e) { return e.what(); }
  return {};
}

// The analysis stages' pre-compile halves, as the default pipeline runs them.
AnalyzedFunction analysed_up_to_joint(const Case& c, const TensorList& args, const AotConfig& config) {
  AnalyzedFunction function = analyze_function(c.fn, args, config, c.name).function;
  function = dedupe_pre_compile(std::move(function)).function;
  return synthetic_base_pre_compile(std::move(function)).function;
}

class CarriedProgramTest : public ::testing::TestWithParam<std::string> {};

TEST_P(CarriedProgramTest, IsTheProgramTheJointStageWouldTrace) {
  const Case& c = case_named(GetParam());
  at::manual_seed(0);
  const TensorList args = c.make_inputs();
  std::optional<at::NoGradGuard> no_grad;
  if (!c.grad_enabled) no_grad.emplace();
  AotConfig config;
  config.keep_inference_input_mutations = c.keep_input_mutations;

  // The analysis as collect_metadata alone gives it, with create_aot_state's decision applied.
  CpuFallbackCounts alone_fallbacks;
  CollectMetadataOptions alone;
  alone.keep_input_mutations = c.keep_input_mutations;
  alone.cpu_fallbacks = &alone_fallbacks;
  ViewAndMutationMeta expected_meta;
  const std::string error = error_of([&] { expected_meta = collect_metadata(c.fn, args, alone); });
  if (!error.empty()) {  // a function the analysis refuses: refused alike
    EXPECT_EQ(error_of([&] { (void)analyze_function(c.fn, args, config, c.name); }), error);
    return;
  }
  const bool needs_autograd = decide_needs_autograd(args, expected_meta);
  if (needs_autograd && !expected_meta.is_train) {
    alone.is_train = true;
    expected_meta = collect_metadata(c.fn, args, alone);
  } else if (!needs_autograd && expected_meta.is_train) {
    expected_meta.is_train = false;
    expected_meta.finalize();
  }

  const MetadataResult analysed = analyze_function(c.fn, args, config, c.name);
  EXPECT_EQ(to_json(analysed.function.meta), to_json(expected_meta));
  EXPECT_EQ(analysed.function.meta.is_train, expected_meta.is_train);
  EXPECT_EQ(analysed.function.needs_autograd, needs_autograd);
  EXPECT_EQ(view_replays(analysed.function.meta), view_replays(expected_meta));
  EXPECT_EQ(analysed.cpu_fallbacks, alone_fallbacks);

  AnalyzedFunction function = analysed_up_to_joint(c, args, config);
  const std::shared_ptr<const CarriedProgram> carried = function.carried;
  // Each trace from the same grad mode (a function may switch it; the pipeline restores it).
  auto trace = [&] {
    at::AutoGradMode restore(at::GradMode::is_enabled());
    return trace_joint_or_inference(function, c.name, config.allow_cpu_fallback);
  };
  const JointResult taken = trace();
  function.carried.reset();
  const JointResult traced = trace();
  EXPECT_EQ(program_text(taken.program), program_text(traced.program)) << (carried ? "carried" : "not carried");
  EXPECT_EQ(taken.program.grad_inputs, traced.program.grad_inputs);
  EXPECT_EQ(taken.program.undefined_grads, traced.program.undefined_grads);
  EXPECT_EQ(taken.cpu_fallbacks, traced.cpu_fallbacks);
  if (carried) {  // taken from the metadata stage, not traced again
    EXPECT_EQ(taken.program.joint, carried->program.joint);
    EXPECT_EQ(taken.program.inference_graph, carried->program.inference_graph);
  }
}

INSTANTIATE_TEST_SUITE_P(Cases, CarriedProgramTest, ::testing::ValuesIn(case_names()),
                         [](const auto& info) { return info.param; });

// Which functions carry: plain ones and BatchNorm's running statistics (data mutations of inputs
// that need no grad) do; the others make the joint stage trace.
TEST(CarriedProgram, CarriedWhereTheJointWouldRepeatTheAnalysis) {
  std::size_t carried = 0, total = 0;
  std::map<std::string, std::pair<std::size_t, std::size_t>> by_kind;  // "model", "corpus", "zoo"
  for (const Case& c : cases()) {
    std::optional<at::NoGradGuard> no_grad;
    if (!c.grad_enabled) no_grad.emplace();
    AotConfig config;
    config.keep_inference_input_mutations = c.keep_input_mutations;
    at::manual_seed(0);
    const TensorList args = c.make_inputs();
    AnalyzedFunction f;
    if (!error_of([&] { f = analysed_up_to_joint(c, args, config); }).empty()) continue;
    const bool carries = f.carried && f.carried->traced_from(f, c.name, true);
    ++total;
    carried += carries;
    auto& [kind_carried, kind_total] = by_kind[c.name.substr(0, c.name.find('_'))];
    kind_carried += carries;
    ++kind_total;
  }
  for (const auto& [kind, counts] : by_kind)
    std::printf("%s: %zu of %zu carried\n", kind.c_str(), counts.first, counts.second);
  // Every zoo block carries (BatchNorm's running statistics included); most of the corpus does.
  for (const char* name :
       {"zoo_resnet50_bottleneck", "zoo_bert_layer", "zoo_adam_foreach_step", "zoo_lstm_regressor"}) {
    at::manual_seed(0);
    const Case& c = case_named(name);
    const TensorList args = c.make_inputs();
    EXPECT_NE(analysed_up_to_joint(c, args, {}).carried, nullptr) << name;
  }
  EXPECT_GT(carried, total / 2) << carried << " of " << total;
  EXPECT_LT(carried, total) << "the corpus has cases that cannot carry";
}

TEST(CarriedProgram, NotCarriedForMutatedGradInputsDuplicatesOrGradModeChanges) {
  const at::Tensor w = at::randn({3}).requires_grad_(true);
  // A data-mutated input that requires grad: prepare_forward clones it first.
  Function mutates = [](const TensorList& x) {
    at::Tensor y = x[0] * 2;
    x[1].mul_(3);
    return TensorList{y + x[1]};
  };
  const at::Tensor leaf = at::randn({3}).requires_grad_(true);
  EXPECT_EQ(analyze_function(mutates, {w, leaf.clone()}, {}).function.carried, nullptr);
  // A tensor passed twice: dedupe gives the second its own leaf.
  Function adds = [](const TensorList& x) { return TensorList{x[0] + x[1]}; };
  EXPECT_EQ(analyze_function(adds, {w, w}, {}).function.carried, nullptr);
  EXPECT_NE(analyze_function(adds, {w, w.detach().clone()}, {}).function.carried, nullptr);
  // Grad mode switched off inside: the epilogue replays the switch.
  Function switches = [](const TensorList& x) {
    at::Tensor y = x[0] * 2;
    at::GradMode::set_enabled(false);
    return TensorList{y};
  };
  EXPECT_EQ(analyze_function(switches, {w}, {}).function.carried, nullptr);
  EXPECT_TRUE(at::GradMode::is_enabled());
}

TEST(CarriedProgram, AFunctionRewrittenBetweenTheStagesIsTracedAfresh) {
  const at::Tensor x = at::randn({4}).requires_grad_(true);
  Function sin = [](const TensorList& a) { return TensorList{a[0].sin()}; };
  AnalyzedFunction analysed = analyze_function(sin, {x}, {}, "f").function;
  ASSERT_NE(analysed.carried, nullptr);
  auto ops = [](const JointResult& r) { return print_graph(r.program.joint->graph); };
  EXPECT_THAT(ops(trace_joint_or_inference(analysed, "f", true)), ::testing::HasSubstr("aten::sin"));

  // A stage that wraps the function: a new callable.
  AnalyzedFunction wrapped = analysed;
  wrapped.fn = [inner = analysed.fn](const TensorList& a) { return TensorList{inner(a)[0].cos()}; };
  EXPECT_THAT(ops(trace_joint_or_inference(wrapped, "f", true)), ::testing::HasSubstr("aten::cos"));
  // Other arguments (another tensor of the same metadata).
  AnalyzedFunction other_args = analysed;
  other_args.args = {at::randn({4}).requires_grad_(true)};
  EXPECT_FALSE(analysed.carried->traced_from(other_args, "f", true));
  // Other metadata, another name, the fallback refused.
  AnalyzedFunction other_meta = analysed;
  other_meta.meta.output_info[0].requires_grad = false;
  EXPECT_FALSE(analysed.carried->traced_from(other_meta, "f", true));
  EXPECT_FALSE(analysed.carried->traced_from(analysed, "g", true));
  EXPECT_FALSE(analysed.carried->traced_from(analysed, "f", false));
  EXPECT_TRUE(analysed.carried->traced_from(analysed, "f", true));
}

// Inputs synthetic_base refuses (an alias of a mutated input, not a view of its base) are refused by
// that stage, not by the metadata stage's decision whether to carry.
TEST(CarriedProgram, InputsSyntheticBaseRefusesAreItsError) {
  const at::Tensor storage = at::zeros({4});
  const at::Tensor w = at::randn({4}).requires_grad_(true);
  Function fn = [](const TensorList& a) {
    a[1].add_(1);
    return TensorList{a[0] * a[2]};
  };
  const TensorList args{storage, storage.view(at::kInt), w};
  MetadataResult analysed = analyze_function(fn, args, {}, "f");
  EXPECT_EQ(analysed.function.carried, nullptr);
  const std::string error =
      error_of([&] { (void)synthetic_base_pre_compile(dedupe_pre_compile(std::move(analysed.function)).function); });
  EXPECT_THAT(error, ::testing::HasSubstr("aotpipe synthetic base: inputs 0 and 1 alias one storage"));
}

// A backward the tracer cannot record fails the joint stage, naming it, as without the carry.
TEST(CarriedProgram, ABackwardErrorIsTheJointStagesError) {
  Function fn = [](const TensorList& a) { return TensorList{at::nextafter(a[0] * 2, a[1])}; };
  const TensorList args{at::randn({3}).requires_grad_(true), at::randn({3})};
  const MetadataResult analysed = analyze_function(fn, args, {}, "f");
  EXPECT_EQ(analysed.function.carried, nullptr);
  try {
    (void)compile("nextafter", fn, args);
    FAIL() << "expected the compile to fail in the joint stage";
  } catch (const std::exception& e) {
    EXPECT_THAT(e.what(), ::testing::HasSubstr("joint"));
    EXPECT_THAT(e.what(), ::testing::HasSubstr("nextafter"));
  }
}

}  // namespace
}  // namespace aotpipe::testing
