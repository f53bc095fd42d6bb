#include "test_support.h"

#include <aotpipe/pipeline/asio_bridge.h>
#include <aotpipe/pipeline/batch.h>
#include <aotpipe/pipeline/chrome_trace.h>
#include <aotpipe/pipeline/pipeline_job.h>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <set>

namespace aotpipe {
namespace {

using namespace std::chrono_literals;
using testing::RecordingContext;
using testing::RecordStage;
using testing::ThrowingStage;

class EventLog final : public StageInstrumentation {
 public:
  explicit EventLog(std::string tag) : tag_(std::move(tag)) {}
  void before_stage(const StageEvent& event) override { append("before", event); }
  void after_stage(const StageEvent& event) override { append("after", event); }
  void stage_failed(const StageEvent& event, const std::exception_ptr&) override { append("failed", event); }
  std::vector<std::string> lines() const {
    std::lock_guard lock(mutex_);
    return lines_;
  }

 private:
  void append(std::string_view what, const StageEvent& event) {
    std::lock_guard lock(mutex_);
    lines_.push_back(fmt::format("{} {} {}:{}", tag_, what, event.job, event.stage));
  }
  std::string tag_;
  mutable std::mutex mutex_;
  std::vector<std::string> lines_;
};

TEST(Instrumentation, HooksBracketEveryStageIncludingNestedAndFailed) {
  Scheduler scheduler(1);
  Pipeline<RecordingContext> inner("group");
  inner.add(RecordStage("b")).add(ThrowingStage("c", "bad"));
  Pipeline<RecordingContext> outer;
  outer.add(RecordStage("a")).add(inner);

  auto log = std::make_shared<EventLog>("log");
  StageHooks hooks;
  hooks.add(log);
  RecordingContext context;
  const JobEnv env{.job_name = "j", .scheduler = scheduler, .hooks = &hooks};
  EXPECT_THROW(sync_wait(outer.run(context, env)), StageError);
  EXPECT_EQ(log->lines(),
            (std::vector<std::string>{"log before j:a", "log after j:a", "log before j:group", "log before j:b",
                                      "log after j:b", "log before j:c", "log failed j:c", "log failed j:group"}));
}

TEST(Instrumentation, SeveralInstrumentationsNestLikeScopes) {
  Scheduler scheduler(1);
  Pipeline<RecordingContext> pipeline;
  pipeline.add(RecordStage("a"));
  struct Tagged final : StageInstrumentation {
    Tagged(std::shared_ptr<std::vector<std::string>> out, std::string tag) : out(std::move(out)), tag(std::move(tag)) {}
    void before_stage(const StageEvent&) override { out->push_back("before " + tag); }
    void after_stage(const StageEvent&) override { out->push_back("after " + tag); }
    std::shared_ptr<std::vector<std::string>> out;
    std::string tag;
  };
  auto order = std::make_shared<std::vector<std::string>>();
  StageHooks hooks;
  hooks.add(std::make_shared<Tagged>(order, "outer")).add(std::make_shared<Tagged>(order, "inner"));
  RecordingContext context;
  sync_wait(pipeline.run(context, JobEnv{.job_name = "j", .scheduler = scheduler, .hooks = &hooks}));
  EXPECT_EQ(*order, (std::vector<std::string>{"before outer", "before inner", "after inner", "after outer"}));
}

std::vector<BatchJob<RecordingContext>> traced_jobs(int count) {
  Pipeline<RecordingContext> pipeline;
  pipeline.add(RecordStage("parse"))
      .add(FunctionStage<RecordingContext>("wait",
                                           [](RecordingContext&, const JobEnv& env) {
                                             return sleep_for(env.scheduler, 100us);  // resumes on some pool thread
                                           }))
      .add(RecordStage("compile"));
  auto shared = std::make_shared<const Pipeline<RecordingContext>>(std::move(pipeline));
  std::vector<BatchJob<RecordingContext>> jobs;
  for (int i = 0; i < count; ++i) jobs.push_back(make_pipeline_job(fmt::format("job{}", i), shared, {}));
  return jobs;
}

void run_batch_observed_by(std::shared_ptr<StageInstrumentation> instrumentation, int jobs) {
  Scheduler scheduler(2);
  BatchOptions options;
  options.hooks.add(std::move(instrumentation));
  run_batch(scheduler, traced_jobs(jobs), std::move(options));
}

TEST(Instrumentation, TimingsCountEveryRun) {
  auto timings = std::make_shared<StageTimings>();
  run_batch_observed_by(timings, 12);
  const auto entries = timings->entries();
  ASSERT_EQ(entries.size(), 3u);
  for (const auto& entry : entries) {
    EXPECT_EQ(entry.runs, 12u) << entry.stage;
    EXPECT_EQ(entry.failures, 0u);
    EXPECT_LE(entry.min, entry.max);
  }
  EXPECT_NE(timings->report().find("compile"), std::string::npos);
}

TEST(Instrumentation, ChromeTraceIsValidTraceEventJson) {
  auto trace = std::make_shared<ChromeTraceRecorder>();
  run_batch_observed_by(trace, 8);

  const auto path = std::filesystem::temp_directory_path() / fmt::format("aotpipe_trace_{}.json", ::getpid());
  trace->save(path);
  std::ifstream file(path);
  const nlohmann::json parsed = nlohmann::json::parse(file);  // throws if not valid JSON
  std::filesystem::remove(path);

  ASSERT_TRUE(parsed.at("traceEvents").is_array());
  std::set<int> named_threads;
  std::set<int> used_threads;
  std::set<std::string> jobs;
  int stages = 0;
  for (const auto& event : parsed.at("traceEvents")) {
    const std::string phase = event.at("ph");
    if (phase == "M") {
      EXPECT_EQ(event.at("name"), "thread_name");
      EXPECT_TRUE(event.at("args").at("name").is_string());
      named_threads.insert(event.at("tid").get<int>());
      continue;
    }
    ASSERT_EQ(phase, "X");
    ++stages;
    EXPECT_TRUE(event.at("pid").is_number_integer());
    EXPECT_TRUE(event.at("ts").is_number());
    EXPECT_GE(event.at("dur").get<double>(), 0.0);
    EXPECT_EQ(event.at("cat"), "stage");
    used_threads.insert(event.at("tid").get<int>());
    if (event.at("args").contains("finished_on_tid"))
      used_threads.insert(event.at("args").at("finished_on_tid").get<int>());
    jobs.insert(event.at("args").at("job").get<std::string>());
  }
  EXPECT_EQ(stages, 8 * 3);
  EXPECT_EQ(jobs.size(), 8u);
  for (int tid : used_threads) EXPECT_TRUE(named_threads.contains(tid)) << "thread " << tid << " has no name";
}

}  // namespace
}  // namespace aotpipe
