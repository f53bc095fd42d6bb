#pragma once
// sync_wait: the bridge from ordinary blocking code into the coroutine world.
#include <aotpipe/pipeline/coroutine_owner.h>
#include <aotpipe/pipeline/scheduler.h>
#include <aotpipe/pipeline/task.h>

#include <semaphore>
#include <stdexcept>

namespace aotpipe {
namespace detail {

// Awaits a task, then releases a semaphore. The release happens in final_suspend, once the
// frame is suspended, so the waiting thread may destroy the frame at once.
struct SyncWaiterPromise : LazyOwnedPromise<SyncWaiterPromise> {
  std::binary_semaphore* done = nullptr;
  auto final_suspend() noexcept {
    struct ReleaseWaiter {
      bool await_ready() noexcept { return false; }
      void await_suspend(std::coroutine_handle<SyncWaiterPromise> self) noexcept { self.promise().done->release(); }
      void await_resume() noexcept {}
    };
    return ReleaseWaiter{};
  }
};
using SyncWaiter = CoroutineOwner<SyncWaiterPromise>;

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
  std::binary_semaphore done{0};
  detail::SyncWaiter waiter = detail::await_completion(task);
  waiter.promise().done = &done;
  waiter.start();
  done.acquire();
  return task.take_result();
}

}  // namespace aotpipe
