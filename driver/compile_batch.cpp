#include <aotpipe/driver/compile_batch.h>

#include <aotpipe/pipeline/instrumentation.h>

#include <memory>
#include <mutex>

namespace aotpipe {
namespace {

using Clock = std::chrono::steady_clock;

// One job's stage runs, in the order they finished. Stages of one job never overlap except
// for a nested pipeline's (which finish before their parent), so the order is the run order
// with inner stages first.
class JobStageLog final : public StageInstrumentation {
 public:
  void after_stage(const StageEvent& event) override { record(event, false); }
  void stage_failed(const StageEvent& event, const std::exception_ptr&) override { record(event, true); }

  std::vector<StageTime> stages() const {
    std::lock_guard lock(mutex_);
    return stages_;
  }

 private:
  void record(const StageEvent& event, bool failed) {
    std::lock_guard lock(mutex_);
    stages_.push_back(
        {std::string(event.stage), std::chrono::duration_cast<std::chrono::nanoseconds>(event.elapsed()), failed});
  }
  mutable std::mutex mutex_;
  std::vector<StageTime> stages_;
};

// The batch's hooks plus this job's log, for the job's lifetime (the task's frame owns them).
// `elapsed` is measured here, not around the batch job: waiting for a slot is not compiling.
Task<CompileOutput> compile_job(CompileJob& job, const Pipeline<CompileState>& pipeline, const JobEnv& batch_env,
                                std::shared_ptr<JobStageLog> log, Clock::duration& elapsed) {
  struct Stopwatch {
    Clock::duration& out;
    Clock::time_point start = Clock::now();
    ~Stopwatch() { out = Clock::now() - start; }
  } stopwatch{elapsed};
  StageHooks hooks = batch_env.hooks ? *batch_env.hooks : StageHooks{};
  hooks.add(log);
  JobEnv env{batch_env.job_name, batch_env.scheduler, batch_env.stop_token, &hooks};
  co_return co_await compile_async(job.name, std::move(job.fn), std::move(job.example_args), std::move(job.config),
                                   pipeline, env, std::move(job.program), std::move(job.cache));
}

}  // namespace

std::vector<CompileResult> compile_batch(std::vector<CompileJob> jobs, const Pipeline<CompileState>& pipeline,
                                         Scheduler& scheduler, BatchOptions options) {
  std::vector<std::shared_ptr<JobStageLog>> logs;
  std::vector<Clock::duration> elapsed(jobs.size(), Clock::duration::zero());
  std::vector<BatchJob<CompileOutput>> batch;
  logs.reserve(jobs.size());
  batch.reserve(jobs.size());
  for (std::size_t i = 0; i < jobs.size(); ++i) {
    auto log = logs.emplace_back(std::make_shared<JobStageLog>());
    batch.push_back({jobs[i].name, [&jobs, &pipeline, &elapsed, i, log](const JobEnv& env) {
                       return compile_job(jobs[i], pipeline, env, log, elapsed[i]);
                     }});
  }
  std::vector<JobResult<CompileOutput>> results = run_batch(scheduler, std::move(batch), std::move(options));

  std::vector<CompileResult> out(results.size());
  for (std::size_t i = 0; i < results.size(); ++i) {
    JobResult<CompileOutput>& r = results[i];
    CompileResult& c = out[i];
    c.name = std::move(r.job);
    c.status = r.status;
    if (r.value) c.output = std::move(*r.value);
    c.message = std::move(r.message);
    c.error = r.error;
    c.stages = logs[i]->stages();
    c.elapsed = std::chrono::duration_cast<std::chrono::nanoseconds>(elapsed[i]);
    for (const StageTime& s : c.stages)
      if (s.failed) {
        c.failed_stage = s.stage;  // the innermost failing stage finishes (and is logged) first
        break;
      }
  }
  return out;
}

std::vector<CompileResult> compile_batch(std::vector<CompileJob> jobs, BatchOptions options) {
  static const Pipeline<CompileState> pipeline = default_compile_pipeline();
  return compile_batch(std::move(jobs), pipeline, default_compile_scheduler(), std::move(options));
}

}  // namespace aotpipe
