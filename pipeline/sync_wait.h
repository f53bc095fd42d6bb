#pragma once
// sync_wait: the bridge from ordinary blocking code into the coroutine world.
#include <aotpipe/pipeline/scheduler.h>
#include <aotpipe/pipeline/task.h>

#include <semaphore>
#include <stdexcept>

namespace aotpipe {
namespace detail {

// A coroutine that awaits a task and then releases a semaphore; the semaphore is released in
// final_suspend, once the frame is suspended, so the waiting thread may destroy it at once.
class SyncWaiter {
 public:
  struct promise_type {
    std::binary_semaphore* done = nullptr;
    SyncWaiter get_return_object() noexcept {
      return SyncWaiter{std::coroutine_handle<promise_type>::from_promise(*this)};
    }
    std::suspend_always initial_suspend() noexcept { return {}; }
    auto final_suspend() noexcept {
      struct ReleaseWaiter {
        bool await_ready() noexcept { return false; }
        void await_suspend(std::coroutine_handle<promise_type> self) noexcept { self.promise().done->release(); }
        void await_resume() noexcept {}
      };
      return ReleaseWaiter{};
    }
    void return_void() noexcept {}
    void unhandled_exception() noexcept { std::terminate(); }  // the awaited part never throws
  };

  explicit SyncWaiter(std::coroutine_handle<promise_type> handle) : handle_(handle) {}
  SyncWaiter(SyncWaiter&& other) noexcept : handle_(std::exchange(other.handle_, {})) {}
  SyncWaiter(const SyncWaiter&) = delete;
  SyncWaiter& operator=(const SyncWaiter&) = delete;
  ~SyncWaiter() {
    if (handle_) handle_.destroy();
  }

  void run_and_wait() {
    std::binary_semaphore done{0};
    handle_.promise().done = &done;
    handle_.resume();
    done.acquire();
  }

 private:
  std::coroutine_handle<promise_type> handle_;
};

template <typename T>
SyncWaiter await_completion(Task<T>& task) {
  co_await task.when_ready();
}

}  // namespace detail

// Runs the task to completion, blocking the calling thread, and returns its value or rethrows
// its exception. The task starts on the calling thread; it moves to a pool with
// `co_await scheduler.schedule()`. Never call it from a pool thread: the blocked thread would
// be a pool thread lost (or a deadlock with one thread), so that throws std::logic_error.
template <typename T>
T sync_wait(Task<T> task) {
  if (Scheduler::on_any_pool_thread()) {
    throw std::logic_error("sync_wait called on a pool thread: co_await the task instead");
  }
  detail::await_completion(task).run_and_wait();
  return task.take_result();
}

}  // namespace aotpipe
