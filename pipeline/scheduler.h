#pragma once
// Scheduler: runs coroutines on a oneTBB task_arena with a fixed number of threads.
//
// `co_await scheduler.schedule()` moves the awaiting coroutine onto a pool thread. Everything
// that resumes a coroutine from outside the pool (Asio completions, timers) goes through
// enqueue(), so coroutine code only ever runs on pool threads (or inline on the thread that
// started it, before its first schedule()).
//
// The scheduler also owns, created on first use, one Asio io_context with one thread that
// serves timers and I/O (see asio_bridge.h). That thread never runs coroutine code.
#include <coroutine>
#include <cstddef>
#include <memory>

namespace boost::asio {
class io_context;
}

namespace aotpipe {

class Scheduler {
 public:
  // The number of threads oneTBB would use by default (the hardware concurrency, or the
  // process's affinity mask).
  static std::size_t default_thread_count();

  explicit Scheduler(std::size_t num_threads = default_thread_count());
  // Waits for the coroutine resumptions already enqueued. Coroutines still suspended on
  // something else (a timer, an unfinished task) are not waited for: finish them first.
  ~Scheduler();
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  std::size_t num_threads() const noexcept;

  struct ScheduleAwaiter {
    Scheduler& scheduler;
    bool await_ready() const noexcept { return false; }
    void await_suspend(std::coroutine_handle<> handle) const { scheduler.enqueue(handle); }
    void await_resume() const noexcept {}
  };
  // Resumes the awaiting coroutine on a pool thread (always re-enqueues, so it also yields).
  [[nodiscard]] ScheduleAwaiter schedule() noexcept { return ScheduleAwaiter{*this}; }

  // Resumes `handle` on a pool thread. Thread-safe; callable from any thread.
  void enqueue(std::coroutine_handle<> handle);

  // True on the threads of this scheduler's pool (while they run its work).
  bool runs_on_current_thread() const noexcept;
  // True on a thread of any Scheduler's pool; blocking waits there would starve the pool.
  static bool on_any_pool_thread() noexcept;

  // The io_context behind timers and I/O, run by one dedicated thread started on first use.
  boost::asio::io_context& io_context();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace aotpipe
