#pragma once
// when_all: run several tasks concurrently and wait for all of them.
//
// The tasks are started one after another on the awaiting thread; each runs inline until its
// first suspension (a task that wants to run in parallel starts with
// `co_await scheduler.schedule()`). The awaiting coroutine resumes on the thread that finishes
// the last task. All tasks always run to completion, even when one fails; then the first
// failure in argument order is rethrown and the other results are discarded. (For per-task
// outcomes, catch inside each task, as run_batch does.)
#include <aotpipe/pipeline/coroutine_owner.h>
#include <aotpipe/pipeline/task.h>

#include <atomic>
#include <tuple>
#include <vector>

namespace aotpipe {
namespace detail {

// Counts the tasks still running, plus one for the starter, so that the last one to finish,
// and only it, resumes the awaiting coroutine.
struct WhenAllLatch {
  explicit WhenAllLatch(std::size_t tasks) : remaining(tasks + 1) {}
  // True for the caller that brought the count to zero.
  bool arrive() noexcept { return remaining.fetch_sub(1, std::memory_order_acq_rel) == 1; }
  std::atomic<std::size_t> remaining;
  std::coroutine_handle<> awaiting;
};

// Awaits one task, then arrives at the latch; the last arrival transfers to the awaiting
// coroutine.
struct WhenAllChildPromise : LazyOwnedPromise<WhenAllChildPromise> {
  WhenAllLatch* latch = nullptr;
  auto final_suspend() noexcept {
    struct ArriveAtLatch {
      bool await_ready() noexcept { return false; }
      std::coroutine_handle<> await_suspend(std::coroutine_handle<WhenAllChildPromise> self) noexcept {
        WhenAllLatch& latch = *self.promise().latch;
        return latch.arrive() ? transfer_to(latch.awaiting) : std::noop_coroutine();
      }
      void await_resume() noexcept {}
    };
    return ArriveAtLatch{};
  }
};
using WhenAllChild = CoroutineOwner<WhenAllChildPromise>;

template <typename T>
WhenAllChild complete_and_arrive(Task<T>& task) {
  co_await task.when_ready();
}

// Starts every child and suspends the awaiting coroutine until the last has finished.
class WhenAllAwaiter {
 public:
  explicit WhenAllAwaiter(std::vector<WhenAllChild> children)
      : children_(std::move(children)), latch_(children_.size()) {}
  bool await_ready() const noexcept { return children_.empty(); }
  bool await_suspend(std::coroutine_handle<> awaiting) {
    latch_.awaiting = awaiting;
    for (WhenAllChild& child : children_) {
      child.promise().latch = &latch_;
      child.start();
    }
    // The starter's own arrival: if every child already finished, do not suspend at all.
    return !latch_.arrive();
  }
  void await_resume() const noexcept {}

 private:
  std::vector<WhenAllChild> children_;
  WhenAllLatch latch_;
};

template <typename... Tasks>
WhenAllAwaiter wait_for_all(Tasks&... tasks) {
  std::vector<WhenAllChild> children;
  children.reserve(sizeof...(Tasks));
  (children.push_back(complete_and_arrive(tasks)), ...);
  return WhenAllAwaiter(std::move(children));
}

}  // namespace detail

// Heterogeneous: `auto [a, b] = co_await when_all(task_a(), task_b());` (void -> std::monostate).
template <typename... Ts>
Task<std::tuple<NonVoid<Ts>...>> when_all(Task<Ts>... tasks) {
  co_await detail::wait_for_all(tasks...);
  // Braces: the results are taken (and the first failure rethrown) in argument order.
  co_return std::tuple<NonVoid<Ts>...>{take_non_void_result(tasks)...};
}

// Over a range: results in the order of the tasks.
template <typename T>
Task<std::vector<NonVoid<T>>> when_all(std::vector<Task<T>> tasks) {
  std::vector<detail::WhenAllChild> children;
  children.reserve(tasks.size());
  for (Task<T>& task : tasks) children.push_back(detail::complete_and_arrive(task));
  co_await detail::WhenAllAwaiter(std::move(children));
  std::vector<NonVoid<T>> results;
  results.reserve(tasks.size());
  for (Task<T>& task : tasks) results.push_back(take_non_void_result(task));
  co_return results;
}

}  // namespace aotpipe
