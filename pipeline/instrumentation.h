#pragma once
// Instrumentation: one hook interface around every stage (MLIR's PassInstrumentation).
//
// Stages never time, trace or report themselves; the pipeline calls the hooks of the job's
// StageHooks before a stage runs, after it succeeds and after it fails. Hooks are called from
// pool threads, concurrently for different jobs, so every implementation must be thread-safe.
// A stage that suspends may finish on another thread than the one it started on; the events
// say both.
#include <chrono>
#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace aotpipe {

struct JobEnv;

struct StageEvent {
  using Clock = std::chrono::steady_clock;
  std::string_view job;
  std::string_view stage;
  Clock::time_point start;
  std::thread::id start_thread;
  // after_stage / stage_failed only: when and where the stage finished.
  Clock::time_point end{};
  std::thread::id end_thread{};
  Clock::duration elapsed() const noexcept { return end - start; }
};

class StageInstrumentation {
 public:
  virtual ~StageInstrumentation() = default;
  virtual void before_stage(const StageEvent& /*event*/) {}
  virtual void after_stage(const StageEvent& /*event*/) {}
  virtual void stage_failed(const StageEvent& /*event*/, const std::exception_ptr& /*error*/) {}
};

// The instrumentations of a batch or job, called in order (failures and ends in reverse
// order, so instrumentations nest like scopes). Fill it before the run; it is read-only while
// jobs run.
class StageHooks {
 public:
  StageHooks& add(std::shared_ptr<StageInstrumentation> instrumentation);
  bool empty() const noexcept { return instrumentations_.empty(); }

  void before_stage(const StageEvent& event) const;
  void after_stage(const StageEvent& event) const;
  void stage_failed(const StageEvent& event, const std::exception_ptr& error) const;

 private:
  std::vector<std::shared_ptr<StageInstrumentation>> instrumentations_;
};

// Total, count, min and max wall time per stage name, over all jobs and threads.
class StageTimings final : public StageInstrumentation {
 public:
  struct Entry {
    std::string stage;
    std::size_t runs = 0;
    std::size_t failures = 0;
    std::chrono::nanoseconds total{0};
    std::chrono::nanoseconds min{std::chrono::nanoseconds::max()};
    std::chrono::nanoseconds max{0};
  };

  void after_stage(const StageEvent& event) override;
  void stage_failed(const StageEvent& event, const std::exception_ptr& error) override;

  // Sorted by total time, longest first.
  std::vector<Entry> entries() const;
  // A fixed-width table of entries(), for logs.
  std::string report() const;

 private:
  void record(const StageEvent& event, bool failed);
  mutable std::mutex mutex_;
  std::vector<Entry> entries_;
};

// Brackets one stage run with the hooks: the pipeline's side of the hook interface.
class StageRunScope {
 public:
  StageRunScope(const JobEnv& env, std::string_view stage);
  void succeeded();
  // Calls the failure hooks, then throws: StageError naming the job and this stage, unless
  // the error already is one (raised by an inner stage of a nested pipeline, whose name is
  // kept) or is a cancellation.
  [[noreturn]] void failed(std::exception_ptr error);

 private:
  const JobEnv& env_;
  StageEvent event_;
  void finish_event();
};

}  // namespace aotpipe
