#pragma once
// bounded_for_each: body(0) ... body(count - 1) on the scheduler, at most `max_concurrency`
// at a time, in index order of starting.
//
// `max_concurrency` workers each take the next index and await its body, so a body that
// suspends (on I/O, a timer, a nested when_all) keeps its slot without holding a thread. Once
// `stop` is requested no further body starts; bodies already running are not interrupted
// (they see the request through their own tokens). Indices never started can be told apart by
// the caller (run_batch marks them cancelled). Bodies should catch their own exceptions: one
// that escapes stops only its worker, and is rethrown once every worker has finished.
#include <aotpipe/pipeline/scheduler.h>
#include <aotpipe/pipeline/task.h>
#include <aotpipe/pipeline/when_all.h>

#include <algorithm>
#include <atomic>
#include <concepts>
#include <stop_token>
#include <vector>

namespace aotpipe {
namespace detail {

template <typename Body>
Task<void> bounded_for_each_worker(Scheduler& scheduler, std::atomic<std::size_t>& next_index, std::size_t count,
                                   Body& body, const std::stop_token& stop) {
  co_await scheduler.schedule();
  while (!stop.stop_requested()) {
    const std::size_t index = next_index.fetch_add(1, std::memory_order_relaxed);
    if (index >= count) break;
    co_await body(index);
  }
}

}  // namespace detail

template <typename Body>
requires std::same_as<std::invoke_result_t<Body&, std::size_t>, Task<void>> Task<void> bounded_for_each(
    Scheduler& scheduler, std::size_t count, std::size_t max_concurrency, Body body, std::stop_token stop = {}) {
  std::atomic<std::size_t> next_index{0};
  const std::size_t workers = std::min(count, std::max<std::size_t>(max_concurrency, 1));
  std::vector<Task<void>> running;
  running.reserve(workers);
  for (std::size_t i = 0; i < workers; ++i) {
    running.push_back(detail::bounded_for_each_worker(scheduler, next_index, count, body, stop));
  }
  co_await when_all(std::move(running));
}

}  // namespace aotpipe
