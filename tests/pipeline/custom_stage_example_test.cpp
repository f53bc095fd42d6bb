// The custom-stage example of docs/pipeline.md, compiled and run as a test. Keep the two in step.
#include <aotpipe/pipeline/batch.h>
#include <aotpipe/pipeline/pipeline_job.h>
#include <aotpipe/pipeline/stage_registry.h>

#include <gtest/gtest.h>

// [custom-stage]
#include <aotpipe/pipeline/pipeline.h>

#include <string>
#include <vector>

// The per-compile context of this example: a list of op names standing in for a graph.
struct ToyContext {
  std::vector<std::string> ops;
};

// Any type with name() and a const run(Context&, const JobEnv&) -> Task<void> is a stage.
// It keeps no state between runs: everything it changes is in the job's context.
class DropOpStage {
 public:
  explicit DropOpStage(std::string op) : op_(std::move(op)) {}
  std::string_view name() const noexcept { return "drop_op"; }
  std::string description() const { return "drop_op(" + op_ + ")"; }
  aotpipe::Task<void> run(ToyContext& context, const aotpipe::JobEnv& env) const {
    co_await env.scheduler.schedule();  // optional: a stage may suspend, hop threads, wait on I/O
    std::erase(context.ops, op_);
  }

 private:
  std::string op_;
};

// Registering it makes "drop_op(<op>)" usable in textual pipelines.
void register_toy_stages(aotpipe::StageRegistry<ToyContext>& registry) {
  registry.add("drop_op", [](std::string_view op) { return DropOpStage(std::string(op)); });
}
// [custom-stage]

namespace {

struct UppercaseStage {
  std::string_view name() const noexcept { return "uppercase"; }
  aotpipe::Task<void> run(ToyContext& context, const aotpipe::JobEnv&) const {
    for (auto& op : context.ops) {
      for (char& c : op) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    }
    co_return;
  }
};

TEST(CustomStageExample, InsertsIntoAParsedPipelineAndRuns) {
  // [custom-stage-use]
  aotpipe::StageRegistry<ToyContext> registry;
  register_toy_stages(registry);
  registry.add<UppercaseStage>("uppercase");

  aotpipe::Pipeline<ToyContext> pipeline = registry.parse("uppercase");
  pipeline.insert_before("uppercase", DropOpStage("dropout"));
  EXPECT_EQ(pipeline.to_string(), "drop_op(dropout),uppercase");

  aotpipe::Scheduler scheduler(2);
  auto shared = std::make_shared<const aotpipe::Pipeline<ToyContext>>(std::move(pipeline));
  std::vector<aotpipe::BatchJob<ToyContext>> jobs;
  jobs.push_back(aotpipe::make_pipeline_job("toy", shared, ToyContext{{"mul", "dropout", "add"}}));
  auto results = aotpipe::run_batch(scheduler, std::move(jobs));
  // [custom-stage-use]
  ASSERT_TRUE(results[0].ok()) << results[0].message;
  EXPECT_EQ(results[0].value->ops, (std::vector<std::string>{"MUL", "ADD"}));
}

}  // namespace
