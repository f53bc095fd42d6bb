#include "test_support.h"

#include <aotpipe/pipeline/errors.h>
#include <aotpipe/pipeline/pipeline.h>
#include <aotpipe/pipeline/scheduler.h>
#include <aotpipe/pipeline/sync_wait.h>

#include <gtest/gtest.h>

namespace aotpipe {
namespace {

using testing::RecordingContext;
using testing::RecordStage;
using testing::ThrowingStage;
using Strings = std::vector<std::string>;

Pipeline<RecordingContext> abc() {
  Pipeline<RecordingContext> pipeline;
  pipeline.add(RecordStage("a")).add(RecordStage("b")).add(RecordStage("c"));
  return pipeline;
}

Strings run(const Pipeline<RecordingContext>& pipeline, Scheduler& scheduler, std::stop_token stop = {}) {
  RecordingContext context;
  const JobEnv env{.job_name = "job", .scheduler = scheduler, .stop_token = stop};
  sync_wait(pipeline.run(context, env));
  return context.ran;
}

std::vector<std::string_view> names(const Pipeline<RecordingContext>& pipeline) { return pipeline.stage_names(); }

TEST(Pipeline, RunsStagesInOrder) {
  Scheduler scheduler(1);
  EXPECT_EQ(run(abc(), scheduler), (Strings{"a", "b", "c"}));
}

TEST(Pipeline, ListsInsertsReplacesAndRemoves) {
  Pipeline<RecordingContext> pipeline = abc();
  EXPECT_EQ(names(pipeline), (std::vector<std::string_view>{"a", "b", "c"}));
  pipeline.insert_after("a", RecordStage("after_a"));
  pipeline.insert_before("a", RecordStage("first"));
  pipeline.insert(pipeline.size(), RecordStage("last"));
  EXPECT_EQ(names(pipeline), (std::vector<std::string_view>{"first", "a", "after_a", "b", "c", "last"}));
  pipeline.replace("b", RecordStage("b2")).remove("c");
  EXPECT_EQ(names(pipeline), (std::vector<std::string_view>{"first", "a", "after_a", "b2", "last"}));
  EXPECT_TRUE(pipeline.contains("b2"));
  EXPECT_FALSE(pipeline.contains("b"));
  EXPECT_EQ(pipeline.to_string(), "first,a,after_a,b2,last");
}

TEST(Pipeline, EditingAMissingStageNamesTheKnownOnes) {
  Pipeline<RecordingContext> pipeline = abc();
  EXPECT_EQ(testing::error_message_of<std::out_of_range>([&] { pipeline.replace("missing", RecordStage("x")); }),
            "pipeline 'pipeline' has no stage 'missing'; its stages: a, b, c");
  EXPECT_THROW(pipeline.insert(4, RecordStage("x")), std::out_of_range);
}

TEST(Pipeline, NestsAsAStage) {
  Scheduler scheduler(1);
  Pipeline<RecordingContext> inner("group");
  inner.add(RecordStage("b")).add(RecordStage("c"));
  Pipeline<RecordingContext> outer;
  outer.add(RecordStage("a")).add(inner).add(RecordStage("d"));
  EXPECT_EQ(outer.to_string(), "a,group(b,c),d");
  EXPECT_EQ(run(outer, scheduler), (Strings{"a", "b", "c", "d"}));
}

TEST(Pipeline, FailureNamesJobAndInnermostStageAndKeepsTheOriginal) {
  Scheduler scheduler(1);
  Pipeline<RecordingContext> inner("group");
  inner.add(RecordStage("b")).add(ThrowingStage("explodes", "out of memory"));
  Pipeline<RecordingContext> outer;
  outer.add(RecordStage("a")).add(inner).add(RecordStage("never"));
  RecordingContext context;
  const JobEnv env{.job_name = "resnet", .scheduler = scheduler};
  try {
    sync_wait(outer.run(context, env));
    FAIL() << "expected a StageError";
  } catch (const StageError& error) {
    EXPECT_EQ(error.job(), "resnet");
    EXPECT_EQ(error.stage(), "explodes");
    EXPECT_STREQ(error.what(), "job 'resnet': stage 'explodes' failed: out of memory");
    EXPECT_THROW(std::rethrow_exception(error.original()), std::runtime_error);
  }
  EXPECT_EQ(context.ran, (Strings{"a", "b"}));
}

TEST(Pipeline, StartsNoStageOnceStopIsRequested) {
  Scheduler scheduler(1);
  std::stop_source stop;
  Pipeline<RecordingContext> pipeline = abc();
  pipeline.insert_after("a", FunctionStage<RecordingContext>("stop_here", [&stop](RecordingContext&, const JobEnv&) {
                          stop.request_stop();
                          return testing::completed();
                        }));
  RecordingContext context;
  const JobEnv env{.job_name = "job", .scheduler = scheduler, .stop_token = stop.get_token()};
  EXPECT_THROW(sync_wait(pipeline.run(context, env)), OperationCancelled);
  EXPECT_EQ(context.ran, (Strings{"a"}));
}

}  // namespace
}  // namespace aotpipe
