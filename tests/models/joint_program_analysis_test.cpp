// The metadata stage's trace carried on into the joint stage's program (JointProgramAnalysis,
// stages/joint/joint.h): for every model, zoo block and metadata-corpus case, the analysis equals
// collect_metadata's alone, and the program cached after the analysis stages (metadata, dedupe,
// synthetic_base, as the default pipeline runs them) is the program the joint stage would trace
// itself (the same graph up to value names, gradients' inputs, undefined gradients and
// CPU-fallback counts). A stage that rewrites the function, or does not say what it preserved,
// drops it and the joint stage traces afresh.
#include <aotpipe/graph/example_tensor.h>
#include <aotpipe/graph/printer.h>
#include <aotpipe/pipeline/pipeline.h>
#include <aotpipe/pipeline/scheduler.h>
#include <aotpipe/pipeline/sync_wait.h>
#include <aotpipe/stages/dedupe/dedupe.h>
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

// Runs `stages` on a state holding `fn` and `args`, as a pipeline does (each stage's report of
// what it preserved applied to the state's analyses).
CompileState run_stages(Pipeline<CompileState> stages, const Function& fn, const TensorList& args,
                        const AotConfig& config, const std::string& name) {
  CompileState state;
  state.name = name;
  state.config = config;
  state.function.fn = fn;
  state.function.args = args;
  Scheduler scheduler(1);
  sync_wait(stages.run(state, JobEnv{.job_name = name, .scheduler = scheduler}));
  return state;
}

// The analysis stages, as the default pipeline runs them.
Pipeline<CompileState> analysis_stages() {
  Pipeline<CompileState> stages("analysis");
  stages.add(CollectMetadataStage{}).add(DedupeStage{}).add(SyntheticBaseStage{});
  return stages;
}

CompileState analysed_up_to_joint(const Case& c, const TensorList& args, const AotConfig& config) {
  return run_stages(analysis_stages(), c.fn, args, config, c.name);
}

class JointProgramAnalysisTest : public ::testing::TestWithParam<std::string> {};

TEST_P(JointProgramAnalysisTest, IsTheProgramTheJointStageWouldTrace) {
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

  if (analysed.joint_program) {  // carried: the program of the analysed function as the joint would trace it
    at::AutoGradMode restore(at::GradMode::is_enabled());
    const JointResult traced = trace_joint_or_inference(analysed.function, c.name, config.allow_cpu_fallback);
    EXPECT_EQ(program_text(analysed.joint_program->program), program_text(traced.program));
    EXPECT_EQ(analysed.joint_program->program.grad_inputs, traced.program.grad_inputs);
    EXPECT_EQ(analysed.joint_program->program.undefined_grads, traced.program.undefined_grads);
    EXPECT_EQ(analysed.joint_program->cpu_fallbacks, traced.cpu_fallbacks);
  }

  // After dedupe and synthetic_base, what is still cached is the program of the function they
  // pass on, and the joint stage takes it rather than tracing.
  CompileState state = analysed_up_to_joint(c, args, config);
  const JointResult* cached = state.analyses.cached<JointProgramAnalysis>();
  if (!cached) return;
  JointResult traced;
  {
    at::AutoGradMode restore(at::GradMode::is_enabled());
    traced = trace_joint_or_inference(state.function, c.name, config.allow_cpu_fallback);
  }
  EXPECT_EQ(program_text(cached->program), program_text(traced.program));
  EXPECT_EQ(cached->program.grad_inputs, traced.program.grad_inputs);
  EXPECT_EQ(cached->program.undefined_grads, traced.program.undefined_grads);
  EXPECT_EQ(cached->cpu_fallbacks, traced.cpu_fallbacks);
  const TracedProgram cached_program = cached->program;
  Scheduler scheduler(1);
  sync_wait(JointStage{}.run(state, JobEnv{.job_name = c.name, .scheduler = scheduler}));
  EXPECT_EQ(state.traced.joint, cached_program.joint);
  EXPECT_EQ(state.traced.inference_graph, cached_program.inference_graph);
}

INSTANTIATE_TEST_SUITE_P(Cases, JointProgramAnalysisTest, ::testing::ValuesIn(case_names()),
                         [](const auto& info) { return info.param; });

// Which functions carry: plain ones and BatchNorm's running statistics (data mutations of inputs
// that need no grad) do; the others make the joint stage trace.
TEST(JointProgramAnalysis, CachedWhereTheJointWouldRepeatTheAnalysis) {
  std::size_t carried = 0, total = 0;
  std::map<std::string, std::pair<std::size_t, std::size_t>> by_kind;  // "model", "corpus", "zoo"
  for (const Case& c : cases()) {
    std::optional<at::NoGradGuard> no_grad;
    if (!c.grad_enabled) no_grad.emplace();
    AotConfig config;
    config.keep_inference_input_mutations = c.keep_input_mutations;
    at::manual_seed(0);
    const TensorList args = c.make_inputs();
    std::optional<CompileState> state;
    if (!error_of([&] { state.emplace(analysed_up_to_joint(c, args, config)); }).empty()) continue;
    const bool carries = state->analyses.cached<JointProgramAnalysis>() != nullptr;
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
    EXPECT_NE(analysed_up_to_joint(c, args, {}).analyses.cached<JointProgramAnalysis>(), nullptr) << name;
  }
  EXPECT_GT(carried, total / 2) << carried << " of " << total;
  EXPECT_LT(carried, total) << "the corpus has cases that cannot carry";
}

TEST(JointProgramAnalysis, NotCachedForMutatedGradInputsDuplicatesOrGradModeChanges) {
  const at::Tensor w = at::randn({3}).requires_grad_(true);
  auto cached_after_analysis = [](const Function& fn, const TensorList& args) {
    return run_stages(analysis_stages(), fn, args, {}, "f").analyses.cached<JointProgramAnalysis>() != nullptr;
  };
  // A data-mutated input that requires grad: prepare_forward clones it first.
  Function mutates = [](const TensorList& x) {
    at::Tensor y = x[0] * 2;
    x[1].mul_(3);
    return TensorList{y + x[1]};
  };
  const at::Tensor leaf = at::randn({3}).requires_grad_(true);
  EXPECT_FALSE(analyze_function(mutates, {w, leaf.clone()}, {}).joint_program);
  EXPECT_FALSE(cached_after_analysis(mutates, {w, leaf.clone()}));
  // A tensor passed twice: the metadata stage's program is of the function as called, and dedupe,
  // which gives the second its own leaf, drops it.
  Function adds = [](const TensorList& x) { return TensorList{x[0] + x[1]}; };
  EXPECT_TRUE(analyze_function(adds, {w, w}, {}).joint_program);
  EXPECT_FALSE(cached_after_analysis(adds, {w, w}));
  EXPECT_TRUE(cached_after_analysis(adds, {w, w.detach().clone()}));
  // Overlapping views of one base, one mutated: synthetic_base merges them and drops it.
  const at::Tensor base = at::randn({6});
  Function mutates_view = [](const TensorList& x) {
    x[0].mul_(2);
    return TensorList{x[0] + x[1]};
  };
  const TensorList overlapping = {base.narrow(0, 0, 4), base.narrow(0, 2, 4)};
  EXPECT_TRUE(analyze_function(mutates_view, overlapping, {}).joint_program);
  EXPECT_FALSE(cached_after_analysis(mutates_view, overlapping));
  // Grad mode switched off inside: the epilogue replays the switch.
  Function switches = [](const TensorList& x) {
    at::Tensor y = x[0] * 2;
    at::GradMode::set_enabled(false);
    return TensorList{y};
  };
  EXPECT_FALSE(analyze_function(switches, {w}, {}).joint_program);
  EXPECT_TRUE(at::GradMode::is_enabled());
}

// A stage between the metadata and the joint stages that does not say what it preserved (a
// Task<void> stage) drops the program; one that rewrites the function and says so too; one that
// preserves it keeps it, and the joint stage takes it.
TEST(JointProgramAnalysis, AStageThatMayRewriteTheFunctionDropsIt) {
  const at::Tensor x = at::randn({4}).requires_grad_(true);
  Function sin = [](const TensorList& a) { return TensorList{a[0].sin()}; };
  auto joint_text = [](const CompileState& state) { return print_graph(state.traced.joint->graph); };

  Pipeline<CompileState> rewrites("rewrites");
  rewrites.add(CollectMetadataStage{})
      .add(FunctionStage<CompileState>("cosine",
                                       [](CompileState& state, const JobEnv&) -> Task<void> {
                                         state.function.fn = [inner = state.function.fn](const TensorList& a) {
                                           return TensorList{inner(a)[0].cos()};
                                         };
                                         co_return;
                                       }))
      .add(JointStage{});
  const CompileState rewritten = run_stages(rewrites, sin, {x}, {}, "f");
  EXPECT_THAT(joint_text(rewritten), ::testing::HasSubstr("aten::cos"));
  EXPECT_TRUE(rewritten.analyses.cached_names().empty());

  struct Observer {
    std::string_view name() const { return "observer"; }
    Task<PreservedAnalyses> run(CompileState&, const JobEnv&) const { co_return PreservedAnalyses::all(); }
  };
  Pipeline<CompileState> observes("observes");
  observes.add(CollectMetadataStage{}).add(Observer{});
  CompileState observed = run_stages(observes, sin, {x}, {}, "f");
  const JointResult* cached = observed.analyses.cached<JointProgramAnalysis>();
  ASSERT_NE(cached, nullptr);
  EXPECT_EQ(observed.analyses.cached_names(), std::vector<std::string_view>{JointProgramAnalysis::name});
  const auto program = cached->program.joint;
  Scheduler scheduler(1);
  sync_wait(JointStage{}.run(observed, JobEnv{.job_name = "f", .scheduler = scheduler}));
  EXPECT_EQ(observed.traced.joint, program);  // taken, not traced again
  EXPECT_THAT(joint_text(observed), ::testing::HasSubstr("aten::sin"));
}

}  // namespace
}  // namespace aotpipe::testing
