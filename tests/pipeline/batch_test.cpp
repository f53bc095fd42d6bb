#include "test_support.h"

#include <aotpipe/pipeline/asio_bridge.h>
#include <aotpipe/pipeline/batch.h>
#include <aotpipe/pipeline/errors.h>
#include <aotpipe/pipeline/pipeline_job.h>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>

namespace aotpipe {
namespace {

using namespace std::chrono_literals;
using testing::RecordingContext;
using testing::RecordStage;
using testing::share;
using testing::ThrowingStage;

TEST(Batch, FailingJobsDoNotLoseTheOthersResults) {
  Scheduler scheduler(2);
  Pipeline<RecordingContext> good;
  good.add(RecordStage("parse")).add(RecordStage("compile"));
  Pipeline<RecordingContext> bad;
  bad.add(RecordStage("parse")).add(ThrowingStage("compile", "unsupported op"));

  std::vector<BatchJob<RecordingContext>> jobs;
  for (int i = 0; i < 20; ++i) {
    const bool fails = i % 7 == 3;
    jobs.push_back(make_pipeline_job(fmt::format("job{}", i), share(fails ? bad : good), RecordingContext{}));
  }
  const auto results = run_batch(scheduler, std::move(jobs), {.max_concurrency = 4});

  ASSERT_EQ(results.size(), 20u);
  for (int i = 0; i < 20; ++i) {
    const auto& result = results[i];
    EXPECT_EQ(result.job, fmt::format("job{}", i));
    if (i % 7 == 3) {
      EXPECT_EQ(result.status, JobStatus::Failed);
      EXPECT_EQ(result.message, fmt::format("job 'job{}': stage 'compile' failed: unsupported op", i));
      EXPECT_THROW(result.rethrow_if_error(), StageError);
      EXPECT_FALSE(result.value.has_value());
    } else {
      ASSERT_EQ(result.status, JobStatus::Succeeded) << result.message;
      EXPECT_EQ(result.value->ran, (std::vector<std::string>{"parse", "compile"}));
    }
  }
}

TEST(Batch, ExceptionsOutsideAnyStageNameTheJob) {
  Scheduler scheduler(1);
  std::vector<BatchJob<int>> jobs;
  jobs.push_back({.name = "plain", .run = [](const JobEnv&) -> Task<int> { throw std::runtime_error("no graph"); }});
  const auto results = run_batch(scheduler, std::move(jobs));
  EXPECT_EQ(results[0].status, JobStatus::Failed);
  EXPECT_EQ(results[0].message, "job 'plain' failed: no graph");
}

// Job `stopper` requests the batch stop from inside its first stage: its own second stage and
// every job not yet started must not run, and all of them must be reported cancelled.
TEST(Batch, CancellationStartsNoNewStageAndReportsTheCancelledJobs) {
  Scheduler scheduler(2);
  std::stop_source batch_stop;
  std::atomic<int> stages_started{0};
  auto counting = [&stages_started](std::string name) {
    return FunctionStage<RecordingContext>(std::move(name), [&stages_started](RecordingContext&, const JobEnv&) {
      stages_started.fetch_add(1);
      return testing::completed();
    });
  };
  Pipeline<RecordingContext> normal;
  normal.add(counting("first")).add(counting("second"));
  Pipeline<RecordingContext> stopping;
  stopping
      .add(FunctionStage<RecordingContext>("stop_batch",
                                           [&batch_stop](RecordingContext&, const JobEnv&) {
                                             batch_stop.request_stop();
                                             return testing::completed();
                                           }))
      .add(counting("after_stop"));

  std::vector<BatchJob<RecordingContext>> jobs;
  jobs.push_back(make_pipeline_job("before", share(normal), RecordingContext{}));
  jobs.push_back(make_pipeline_job("stopper", share(stopping), RecordingContext{}));
  for (int i = 0; i < 5; ++i) jobs.push_back(make_pipeline_job(fmt::format("later{}", i), share(normal), {}));

  // One job at a time makes the order of jobs deterministic.
  const auto results =
      run_batch(scheduler, std::move(jobs), {.max_concurrency = 1, .stop_token = batch_stop.get_token()});

  EXPECT_EQ(results[0].status, JobStatus::Succeeded);
  EXPECT_EQ(results[1].status, JobStatus::Cancelled);
  EXPECT_EQ(results[1].message, "job 'stopper' cancelled before stage 'after_stop'");
  for (std::size_t i = 2; i < results.size(); ++i) {
    EXPECT_EQ(results[i].status, JobStatus::Cancelled);
    EXPECT_EQ(results[i].message, fmt::format("job 'later{}' was not started: the batch was cancelled", i - 2));
    EXPECT_THROW(results[i].rethrow_if_error(), OperationCancelled);
  }
  EXPECT_EQ(stages_started.load(), 2) << "only the first job's two stages may have run";
}

TEST(Batch, AlreadyCancelledBatchRunsNothing) {
  Scheduler scheduler(2);
  std::stop_source stop;
  stop.request_stop();
  std::vector<BatchJob<void>> jobs(3, BatchJob<void>{.name = "job", .run = [](const JobEnv&) {
                                                       ADD_FAILURE() << "a job of a cancelled batch started";
                                                       return testing::completed();
                                                     }});
  for (const auto& result : run_batch(scheduler, std::move(jobs), {.stop_token = stop.get_token()})) {
    EXPECT_EQ(result.status, JobStatus::Cancelled);
  }
}

TEST(Batch, PerJobTimeoutStopsOnlyTheSlowJob) {
  Scheduler scheduler(2);
  auto sleeping_job = [](std::string name, std::chrono::steady_clock::duration delay) {
    return BatchJob<std::string>{.name = name, .run = [delay, name](const JobEnv& env) -> Task<std::string> {
                                   co_await sleep_for(env.scheduler, delay, env.stop_token);
                                   co_return name + " done";
                                 }};
  };
  std::vector<BatchJob<std::string>> jobs;
  jobs.push_back(sleeping_job("fast", 0ms));
  jobs.push_back(sleeping_job("stuck", 1h));
  jobs.push_back(sleeping_job("fast too", 0ms));
  const auto results = run_batch(scheduler, std::move(jobs), {.per_job_timeout = 50ms});

  EXPECT_EQ(results[0].status, JobStatus::Succeeded);
  EXPECT_EQ(*results[0].value, "fast done");
  EXPECT_EQ(results[1].status, JobStatus::TimedOut);
  EXPECT_EQ(results[1].message, "job 'stuck' timed out after 50ms: sleep cancelled");
  EXPECT_EQ(results[2].status, JobStatus::Succeeded);
}

TEST(Batch, TimedOutPipelineStopsAtTheNextStage) {
  Scheduler scheduler(1);
  Pipeline<RecordingContext> pipeline;
  pipeline
      .add(FunctionStage<RecordingContext>("waits_for_timeout",
                                           [](RecordingContext&, const JobEnv& env) {
                                             // Ignores the stop token on purpose: the pipeline itself must stop at the boundary.
                                             auto wait = [](const JobEnv& job) -> Task<void> {
                                               while (!job.stop_token.stop_requested())
                                                 co_await sleep_for(job.scheduler, 1ms);
                                             };
                                             return wait(env);
                                           }))
      .add(RecordStage("never"));
  std::vector<BatchJob<RecordingContext>> jobs;
  jobs.push_back(make_pipeline_job("slow", share(pipeline), RecordingContext{}));
  const auto results = run_batch(scheduler, std::move(jobs), {.per_job_timeout = 10ms});
  EXPECT_EQ(results[0].status, JobStatus::TimedOut);
  EXPECT_EQ(results[0].message, "job 'slow' timed out after 10ms: job 'slow' cancelled before stage 'never'");
}

TEST(Batch, NeverExceedsMaxConcurrency) {
  Scheduler scheduler(3);
  std::atomic<int> in_flight{0};
  std::atomic<int> most_in_flight{0};
  std::vector<BatchJob<void>> jobs;
  for (int i = 0; i < 40; ++i) {
    jobs.push_back({.name = fmt::format("job{}", i), .run = [&](const JobEnv& env) -> Task<void> {
                      const int now = in_flight.fetch_add(1) + 1;
                      int seen = most_in_flight.load();
                      while (now > seen && !most_in_flight.compare_exchange_weak(seen, now)) {}
                      co_await sleep_for(env.scheduler, 200us);  // holds its slot without a thread
                      in_flight.fetch_sub(1);
                    }});
  }
  const auto results = run_batch(scheduler, std::move(jobs), {.max_concurrency = 2});
  for (const auto& result : results) EXPECT_TRUE(result.ok()) << result.message;
  EXPECT_LE(most_in_flight.load(), 2);
  EXPECT_GE(most_in_flight.load(), 1);
}

TEST(Batch, ProgressIsSerializedAndComplete) {
  Scheduler scheduler(2);
  std::vector<BatchJob<int>> jobs;
  for (int i = 0; i < 30; ++i) {
    jobs.push_back({.name = fmt::format("job{}", i), .run = [i](const JobEnv& env) -> Task<int> {
                      co_await env.scheduler.schedule();
                      if (i % 10 == 0) throw std::runtime_error("bad input");
                      co_return i;
                    }});
  }
  std::vector<std::size_t> finished_counts;  // unsynchronized on purpose: calls must not overlap
  BatchProgress last;
  BatchOptions options;
  options.progress = [&](const BatchProgress& progress) {
    finished_counts.push_back(progress.finished);
    last = progress;
  };
  run_batch(scheduler, std::move(jobs), std::move(options));
  ASSERT_EQ(finished_counts.size(), 30u);
  for (std::size_t i = 0; i < finished_counts.size(); ++i) EXPECT_EQ(finished_counts[i], i + 1);
  EXPECT_EQ(last.total, 30u);
  EXPECT_EQ(last.succeeded, 27u);
  EXPECT_EQ(last.failed, 3u);
}

}  // namespace
}  // namespace aotpipe
