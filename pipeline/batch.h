#pragma once
// run_batch: many jobs on one scheduler, bounded, cancellable, with per-job timeouts, hooks
// and progress; one result per job, whatever happens to the others.
//
//   std::vector<BatchJob<int>> jobs = ...;
//   auto results = run_batch(scheduler, std::move(jobs),
//                            {.max_concurrency = 8, .stop_token = stop.get_token(),
//                             .per_job_timeout = 30s, .progress = print_progress});
//
// A job is a name and a function from its JobEnv to a Task<T>. Results come back in the
// order of the jobs: Succeeded with the value, Failed with the exception (a StageError names
// the job and the stage), Cancelled (the batch's stop token was triggered before the job
// started or before one of its stages) or TimedOut (the job ran longer than per_job_timeout
// and was stopped at its next stage boundary, or by a cancellable wait).
#include <aotpipe/pipeline/bounded_for_each.h>
#include <aotpipe/pipeline/errors.h>
#include <aotpipe/pipeline/instrumentation.h>
#include <aotpipe/pipeline/job_env.h>
#include <aotpipe/pipeline/scheduler.h>
#include <aotpipe/pipeline/sync_wait.h>
#include <aotpipe/pipeline/task.h>

#include <chrono>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <stop_token>
#include <string>
#include <string_view>
#include <vector>

namespace aotpipe {

enum class JobStatus { Succeeded, Failed, Cancelled, TimedOut };
std::string_view to_string(JobStatus status) noexcept;

struct BatchProgress {
  std::size_t total = 0;
  std::size_t finished = 0;
  std::size_t succeeded = 0;
  std::size_t failed = 0;
  std::size_t cancelled = 0;
  std::size_t timed_out = 0;
  std::string_view job;  // the job that just finished
  JobStatus status = JobStatus::Succeeded;
};

struct BatchOptions {
  // Jobs in flight at once; 0 means the scheduler's thread count.
  std::size_t max_concurrency = 0;
  // Cancels the batch: no job and no stage starts afterwards.
  std::stop_token stop_token = {};
  // Measured from the start of each job; zero means no timeout.
  std::chrono::steady_clock::duration per_job_timeout = std::chrono::steady_clock::duration::zero();
  // Around every stage of every job.
  StageHooks hooks = {};
  // After each job finishes (including those never started, at the end). Calls are serialized,
  // never concurrent, and come from pool threads; it must not throw.
  std::function<void(const BatchProgress&)> progress = {};
};

template <typename T>
struct BatchJob {
  std::string name;
  // Called once, on a pool thread; the JobEnv outlives the returned task.
  std::function<Task<T>(const JobEnv&)> run;
};

template <typename T>
struct JobResult {
  std::string job;
  JobStatus status = JobStatus::Cancelled;
  std::optional<NonVoid<T>> value;  // Succeeded only
  std::exception_ptr error;         // all but Succeeded
  std::string message;              // all but Succeeded: names the job (and stage, when known)

  bool ok() const noexcept { return status == JobStatus::Succeeded; }
  void rethrow_if_error() const {
    if (error) std::rethrow_exception(error);
  }
};

namespace detail {

struct JobOutcome {
  JobStatus status;
  std::string message;
};

// The non-generic half of run_batch: concurrency, progress, and each job's stop source and
// deadline.
class BatchController {
 public:
  BatchController(Scheduler& scheduler, const BatchOptions& options, std::size_t total_jobs);
  std::size_t max_concurrency() const noexcept { return max_concurrency_; }
  const BatchOptions& options() const noexcept { return options_; }
  Scheduler& scheduler() const noexcept { return scheduler_; }
  void report(std::string_view job, JobStatus status) noexcept;
  static JobOutcome not_started(std::string_view job);

 private:
  Scheduler& scheduler_;
  const BatchOptions& options_;
  std::size_t max_concurrency_;
  std::mutex progress_mutex_;
  BatchProgress progress_;
};

// One job in flight: its environment, a stop source linked to the batch's, and its deadline.
class JobRun {
 public:
  JobRun(const BatchController& batch, std::string job_name);
  ~JobRun();
  JobRun(const JobRun&) = delete;
  JobRun& operator=(const JobRun&) = delete;

  const JobEnv& env() const noexcept { return env_; }
  // Failed, Cancelled or TimedOut, and the message, for the exception the job ended with.
  JobOutcome classify(const std::exception_ptr& error) const;

 private:
  struct Deadline;
  std::stop_source stop_source_;
  std::stop_callback<std::function<void()>> follow_batch_stop_;
  std::shared_ptr<Deadline> deadline_;
  std::chrono::steady_clock::duration timeout_;
  JobEnv env_;
};

template <typename T>
Task<void> run_batch_job(BatchController& batch, BatchJob<T>& job, JobResult<T>& result) {
  std::exception_ptr error;
  {
    JobRun run(batch, job.name);
    try {
      if constexpr (std::is_void_v<T>) {
        co_await job.run(run.env());
        result.value.emplace();
      } else {
        result.value.emplace(co_await job.run(run.env()));
      }
      result.status = JobStatus::Succeeded;
    } catch (...) { error = std::current_exception(); }
    if (error) {
      JobOutcome outcome = run.classify(error);
      result.status = outcome.status;
      result.message = std::move(outcome.message);
      result.error = error;
    }
  }
  batch.report(result.job, result.status);
}

}  // namespace detail

// Awaitable form, for use inside another task.
template <typename T>
Task<std::vector<JobResult<T>>> run_batch_async(Scheduler& scheduler, std::vector<BatchJob<T>> jobs,
                                                BatchOptions options = {}) {
  detail::BatchController batch(scheduler, options, jobs.size());
  std::vector<JobResult<T>> results(jobs.size());
  for (std::size_t i = 0; i < jobs.size(); ++i) results[i].job = jobs[i].name;
  // Not vector<bool>: workers set different elements concurrently, which must not share bytes.
  std::vector<std::uint8_t> started(jobs.size(), 0);
  co_await bounded_for_each(
      scheduler, jobs.size(), batch.max_concurrency(),
      [&](std::size_t index) {
        started[index] = 1;  // each index is written by exactly one worker
        return detail::run_batch_job(batch, jobs[index], results[index]);
      },
      options.stop_token);
  for (std::size_t i = 0; i < jobs.size(); ++i) {
    if (started[i]) continue;
    detail::JobOutcome outcome = detail::BatchController::not_started(jobs[i].name);
    results[i].status = outcome.status;
    results[i].message = std::move(outcome.message);
    results[i].error = std::make_exception_ptr(OperationCancelled(results[i].message));
    batch.report(results[i].job, results[i].status);
  }
  co_return results;
}

// Blocking form. Not from a pool thread (see sync_wait).
template <typename T>
std::vector<JobResult<T>> run_batch(Scheduler& scheduler, std::vector<BatchJob<T>> jobs, BatchOptions options = {}) {
  return sync_wait(run_batch_async(scheduler, std::move(jobs), std::move(options)));
}

}  // namespace aotpipe
