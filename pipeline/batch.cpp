#include <aotpipe/pipeline/batch.h>

#include <aotpipe/pipeline/asio_bridge.h>
#include <aotpipe/pipeline/errors.h>

#include <fmt/chrono.h>
#include <fmt/format.h>

#include <atomic>

namespace aotpipe {

std::string_view to_string(JobStatus status) noexcept {
  switch (status) {
    case JobStatus::Succeeded: return "succeeded";
    case JobStatus::Failed: return "failed";
    case JobStatus::Cancelled: return "cancelled";
    case JobStatus::TimedOut: return "timed out";
  }
  return "unknown";
}

namespace detail {

BatchController::BatchController(Scheduler& scheduler, const BatchOptions& options, std::size_t total_jobs)
    : scheduler_(scheduler),
      options_(options),
      max_concurrency_(options.max_concurrency != 0 ? options.max_concurrency : scheduler.num_threads()) {
  progress_.total = total_jobs;
}

void BatchController::report(std::string_view job, JobStatus status) noexcept {
  std::lock_guard lock(progress_mutex_);
  ++progress_.finished;
  switch (status) {
    case JobStatus::Succeeded: ++progress_.succeeded; break;
    case JobStatus::Failed: ++progress_.failed; break;
    case JobStatus::Cancelled: ++progress_.cancelled; break;
    case JobStatus::TimedOut: ++progress_.timed_out; break;
  }
  progress_.job = job;
  progress_.status = status;
  // Under the lock, so the callback sees the counts in order and is never called concurrently.
  if (options_.progress) options_.progress(progress_);
}

JobOutcome BatchController::not_started(std::string_view job) {
  return {JobStatus::Cancelled, fmt::format("job '{}' was not started: the batch was cancelled", job)};
}

// Fires on the timer's strand: marks the job timed out and requests it to stop. Shared with the
// timer's handler, which may run after the job (and its JobRun) is gone.
struct JobRun::Deadline {
  std::shared_ptr<StrandTimer> timer;
  std::atomic<bool> expired{false};
};

JobRun::JobRun(const BatchController& batch, std::string job_name)
    : follow_batch_stop_(batch.options().stop_token, [this] { stop_source_.request_stop(); }),
      timeout_(batch.options().per_job_timeout),
      env_{.job_name = std::move(job_name),
           .scheduler = batch.scheduler(),
           .stop_token = stop_source_.get_token(),
           .hooks = batch.options().hooks.empty() ? nullptr : &batch.options().hooks} {
  if (timeout_ <= std::chrono::steady_clock::duration::zero()) return;
  deadline_ = std::make_shared<Deadline>();
  deadline_->timer = StrandTimer::create(batch.scheduler().io_context(), timeout_);
  deadline_->timer->async_wait([deadline = deadline_, stop = stop_source_](boost::system::error_code error) mutable {
    if (error) return;  // disarmed: the job finished first
    deadline->expired.store(true, std::memory_order_release);
    stop.request_stop();
  });
}

JobRun::~JobRun() {
  if (deadline_) deadline_->timer->cancel();
}

JobOutcome JobRun::classify(const std::exception_ptr& error) const {
  try {
    std::rethrow_exception(error);
  } catch (const OperationCancelled& cancelled) {
    if (deadline_ && deadline_->expired.load(std::memory_order_acquire)) {
      return {JobStatus::TimedOut,
              fmt::format("job '{}' timed out after {}: {}", env_.job_name,
                          std::chrono::duration_cast<std::chrono::milliseconds>(timeout_), cancelled.what())};
    }
    return {JobStatus::Cancelled, cancelled.what()};
  } catch (const StageError& failed) { return {JobStatus::Failed, failed.what()}; } catch (...) {
    return {JobStatus::Failed, fmt::format("job '{}' failed: {}", env_.job_name, describe_exception(error))};
  }
}

}  // namespace detail
}  // namespace aotpipe
