// compile_batch: concurrent compiles with isolated failures and per-stage timings; graph files
// as programs (graph_function); pipelines written as text (compile_stage_registry).
#include <aotpipe/graph/parser.h>
#include <aotpipe/pipeline/scheduler.h>
#include <aotpipe/driver/compile_batch.h>
#include <aotpipe/stages/compile_stages.h>
#include <aotpipe/runtime/eager_equivalence.h>
#include <aotpipe/runtime/graph_function.h>
#include <aotpipe/stages/partition/default_partition.h>

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>

namespace aotpipe {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

TensorList params(std::initializer_list<std::vector<int64_t>> shapes) {
  TensorList out;
  for (const auto& s : shapes) out.push_back(at::randn(s).requires_grad_(true));
  return out;
}

Function mlp = [](const TensorList& a) { return TensorList{at::relu(at::mm(a[0], a[1])).sum()}; };
Function sin_cos = [](const TensorList& a) { return TensorList{a[0].sin().cos()}; };
// item() is data-dependent: fake tracing cannot give a value, so the metadata stage fails.
Function data_dependent = [](const TensorList& a) { return TensorList{a[0] * a[0].sum().item<double>()}; };

std::vector<std::string> stage_names(const CompileResult& r) {
  std::vector<std::string> names;
  for (const StageTime& s : r.stages) names.push_back(s.stage);
  return names;
}

TEST(CompileBatch, CompilesEveryJobAndIsolatesTheFailingOne) {
  std::vector<CompileJob> jobs;
  jobs.push_back({"mlp", mlp, params({{4, 8}, {8, 3}}), {}});
  jobs.push_back({"broken", data_dependent, params({{5}}), {}});
  jobs.push_back({"sin_cos", sin_cos, params({{16}}), {}});
  std::atomic<int> progress_calls{0};
  std::vector<CompileResult> results = compile_batch(
      std::move(jobs), BatchOptions{.max_concurrency = 2, .progress = [&](const BatchProgress&) { ++progress_calls; }});

  ASSERT_EQ(results.size(), 3u);
  EXPECT_EQ(progress_calls.load(), 3);
  EXPECT_EQ(results[0].name, "mlp");
  EXPECT_EQ(results[1].name, "broken");
  EXPECT_EQ(results[2].name, "sin_cos");

  const CompileResult& broken = results[1];
  EXPECT_FALSE(broken.ok());
  EXPECT_EQ(broken.status, JobStatus::Failed);
  EXPECT_EQ(broken.failed_stage, "metadata");
  EXPECT_THAT(broken.message, HasSubstr("broken"));
  EXPECT_THAT(broken.message, HasSubstr("metadata"));
  EXPECT_THAT(broken.message, HasSubstr("aten::_local_scalar_dense"));  // what item() dispatches to
  EXPECT_FALSE(broken.output.has_value());
  ASSERT_FALSE(broken.stages.empty());
  EXPECT_TRUE(broken.stages.back().failed);

  for (std::size_t i : {0u, 2u}) {
    const CompileResult& r = results[i];
    ASSERT_TRUE(r.ok()) << r.message;
    EXPECT_THAT(stage_names(r), ElementsAre("metadata", "dedupe", "synthetic_base", "joint", "partition", "compile"));
    for (const StageTime& s : r.stages) EXPECT_FALSE(s.failed) << s.stage;
    EXPECT_GT(r.elapsed.count(), 0);
    EXPECT_TRUE(r.output->state()->partition != nullptr) << "inputs require grad: a training compile";
  }
  // The compiled functions behave like eager.
  const Function compiled_mlp = [&](const TensorList& a) { return results[0].output->runtime(a); };
  EXPECT_THAT(compare_with_eager(mlp, compiled_mlp, [] { return params({{4, 8}, {8, 3}}); }), ::testing::IsEmpty());
  const Function compiled_sin_cos = [&](const TensorList& a) { return results[2].output->runtime(a); };
  EXPECT_THAT(compare_with_eager(sin_cos, compiled_sin_cos, [] { return params({{16}}); }), ::testing::IsEmpty());
}

// --check's judge: a result that float32 rounding puts beyond allclose passes when it is as close
// to a float64 run of the eager function as eager's float32 result is; a wrong one fails anyway.
// Eager computes (x + 1e4) - 1e4, whose float32 rounding (~5e-4) exceeds rtol 1e-4 and atol 1e-5.
TEST(EagerEquivalence, Fp64ReferenceJudgesByFloat32sOwnError) {
  const Function eager = [](const TensorList& a) { return TensorList{(a[0] * 1.0 + 1e4) - 1e4}; };
  const Function exact = [](const TensorList& a) { return TensorList{a[0] * 1.0}; };
  const Function wrong = [](const TensorList& a) { return TensorList{a[0] * 1.0 + 3e-3}; };
  auto inputs = [] { return TensorList{at::randn({256}, at::requires_grad())}; };
  EXPECT_THAT(compare_with_eager(eager, exact, inputs), ::testing::Contains(HasSubstr("output 0 values")));
  const EquivalenceTolerance fp64{.fp64_reference = true};
  EXPECT_THAT(compare_with_eager(eager, exact, inputs, fp64), ::testing::IsEmpty());
  EXPECT_THAT(compare_with_eager(eager, wrong, inputs, fp64), ::testing::Contains(HasSubstr("output 0 values")));

  const at::Tensor reference = at::randn({64}, at::kDouble);
  const at::Tensor noise = at::randn({64}, at::kDouble) * 1e-3;
  const at::Tensor eager32 = (reference + noise).to(at::kFloat);
  EXPECT_TRUE(within_fp64_error(eager32, (reference + 1.5 * noise).to(at::kFloat), reference));
  EXPECT_FALSE(within_fp64_error(eager32, (reference + 3 * noise).to(at::kFloat), reference));
  EXPECT_FALSE(within_fp64_error(eager32, eager32.narrow(0, 0, 32), reference));  // other sizes
}

// A graph closing over a float32 constant has its float64 reference only with the constant in
// float64 (mm refuses float64 times float32): graph_function_in_float64 gives --check that run.
TEST(EagerEquivalence, Fp64ReferenceOfAGraphPromotesItsConstants) {
  auto graph = std::make_shared<Graph>(parse_graph(R"(graph near_1e4(%x: f32[1, 256] requires_grad):
  %eye: f32[256, 256] = constant("eye")
  %mm: f32[1, 256] = aten::mm(%x, %eye)
  %add: f32[1, 256] = aten::add.Scalar(%mm, 10000.0)
  %sub: f32[1, 256] = aten::sub.Scalar(%add, 10000.0)
  return (%sub)
)"));
  graph->bind_constant("eye", at::eye(256));
  const Function eager = graph_function(graph);
  const Function exact = [](const TensorList& a) { return TensorList{a[0] * 1.0}; };
  const Function wrong = [](const TensorList& a) { return TensorList{a[0] * 1.0 + 3e-3}; };
  auto inputs = [] { return TensorList{at::randn({1, 256}, at::requires_grad())}; };
  const EquivalenceTolerance fp64{.fp64_reference = true};
  EXPECT_THAT(compare_with_eager(eager, exact, inputs, fp64), ::testing::Contains(HasSubstr("output 0 values")))
      << "without a float64 program the fixed tolerance alone judges";
  const Function eager_in_float64 = graph_function_in_float64(*graph);
  EXPECT_THAT(compare_with_eager(eager, exact, inputs, fp64, eager_in_float64), ::testing::IsEmpty());
  EXPECT_THAT(compare_with_eager(eager, wrong, inputs, fp64, eager_in_float64),
              ::testing::Contains(HasSubstr("output 0 values")));
  EXPECT_EQ(graph->tensor_constants().at("eye").scalar_type(), at::kFloat) << "the graph itself is left as it was";
}

TEST(CompileBatch, StopTokenCancelsJobsNotStarted) {
  std::stop_source stop;
  stop.request_stop();
  std::vector<CompileJob> jobs;
  jobs.push_back({"a", sin_cos, params({{4}}), {}});
  jobs.push_back({"b", sin_cos, params({{4}}), {}});
  for (const CompileResult& r : compile_batch(std::move(jobs), BatchOptions{.stop_token = stop.get_token()})) {
    EXPECT_EQ(r.status, JobStatus::Cancelled) << r.name;
    EXPECT_FALSE(r.output.has_value());
  }
}

constexpr const char* kGraphText =
    R"(graph affine_tanh(%x: f32[4, 3], %w: f32[3, 5] requires_grad, %b: f32[5] requires_grad):
  %mm: f32[4, 5] = aten::mm(%x, %w)
  %add: f32[4, 5] = aten::add.Tensor(%mm, %b)
  %tanh: f32[4, 5] = aten::tanh(%add)
  return (%tanh, %mm)
)";

TEST(GraphFunction, AGraphCompilesAndRunsLikeItsInterpretation) {
  auto graph = std::make_shared<const Graph>(parse_graph(kGraphText));
  Function fn = graph_function(graph);
  auto gen = at::make_generator<at::CPUGeneratorImpl>(7);
  TensorList args = example_args(*graph, gen);
  ASSERT_EQ(args.size(), 3u);
  EXPECT_FALSE(args[0].requires_grad());
  EXPECT_TRUE(args[1].requires_grad());
  EXPECT_EQ(args[1].sizes(), at::IntArrayRef({3, 5}));

  std::vector<CompileJob> jobs;
  jobs.push_back({graph->name(), fn, args, {}});
  std::vector<CompileResult> results = compile_batch(std::move(jobs));
  ASSERT_TRUE(results[0].ok()) << results[0].message;
  const Function compiled = [&](const TensorList& a) { return results[0].output->runtime(a); };
  auto make_inputs = [&] {
    auto g = at::make_generator<at::CPUGeneratorImpl>(11);
    return example_args(*graph, g);
  };
  EXPECT_THAT(compare_with_eager(fn, compiled, make_inputs), ::testing::IsEmpty());
}

TEST(GraphFunction, NonTensorInputIsRejectedByName) {
  auto graph = std::make_shared<const Graph>(
      parse_graph("graph scaled(%x: f32[2], %k: int):\n  %mul: f32[2] = aten::mul.Scalar(%x, %k)\n  return (%mul)\n"));
  try {
    graph_function(graph);
    FAIL() << "expected an error";
  } catch (const GraphError& e) {
    EXPECT_THAT(e.what(), HasSubstr("scaled"));
    EXPECT_THAT(e.what(), HasSubstr("input 1 (%k)"));
  }
}

TEST(CompilePipelineText, PartitionParameterOverridesTheConfig) {
  const Pipeline<CompileState> pipeline =
      compile_stage_registry().parse("metadata,dedupe,synthetic_base,joint,partition(default),compile");
  const Function chain = [](const TensorList& a) { return TensorList{a[0].sin().sin().sin()}; };
  std::vector<CompileJob> jobs;
  jobs.push_back({"chain", chain, params({{256}}), {}});  // config: min-cut by default
  std::vector<CompileResult> results = compile_batch(std::move(jobs), pipeline, default_compile_scheduler());
  ASSERT_TRUE(results[0].ok()) << results[0].message;
  const CompileState& state = *results[0].output->state();
  const PartitionResult by_default = partitioners::default_partition()(*state.traced.joint);
  EXPECT_EQ(state.partition->saved_bytes, by_default.saved_bytes);
  EXPECT_EQ(state.partition->saved_values, by_default.saved_values);
}

// compile_stages() is the one list: the default pipeline, its text and the registry follow it.
TEST(CompilePipelineText, OneListOfStages) {
  std::vector<std::string_view> listed;
  for (const CompileStageEntry& stage : compile_stages()) {
    listed.push_back(stage.name);
    EXPECT_TRUE(compile_stage_registry().contains(stage.name)) << stage.name;
    EXPECT_FALSE(stage.summary.empty()) << stage.name;
  }
  EXPECT_EQ(listed.size(), 6u);
  EXPECT_EQ(compile_stage_registry().names().size(), listed.size() + 1);  // and `group`
  const Pipeline<CompileState> pipeline = default_compile_pipeline();
  const std::vector<std::string_view> stages = pipeline.stage_names();
  EXPECT_EQ(std::vector<std::string>(stages.begin(), stages.end()),
            std::vector<std::string>(listed.begin(), listed.end()));
  EXPECT_EQ(default_compile_pipeline_text(), "metadata,dedupe,synthetic_base,joint,partition,compile");
}

TEST(CompilePipelineText, ErrorsNameWhatIsWrong) {
  try {
    compile_stage_registry().parse("metadata,frobnicate,compile");
    FAIL() << "expected an error";
  } catch (const PipelineParseError& e) {
    EXPECT_THAT(e.what(), HasSubstr("frobnicate"));
    EXPECT_THAT(e.what(), HasSubstr("synthetic_base"));  // lists the known stages
  }
  try {
    compile_stage_registry().parse("metadata,partition(fastest)");
    FAIL() << "expected an error";
  } catch (const PipelineParseError& e) { EXPECT_THAT(e.what(), HasSubstr("partition")); }
  EXPECT_THROW(partitioner_named("fastest"), std::invalid_argument);
  EXPECT_NO_THROW(compile_stage_registry().parse(default_compile_pipeline_text()));
}

}  // namespace
}  // namespace aotpipe
