#include <aotpipe/pipeline/scheduler.h>
#include <aotpipe/pipeline/sync_wait.h>
#include <aotpipe/pipeline/when_all.h>

#include <gtest/gtest.h>

#include <atomic>
#include <numeric>
#include <stdexcept>
#include <string>

namespace aotpipe {
namespace {

Task<int> square_on_pool(Scheduler& scheduler, int value) {
  co_await scheduler.schedule();
  co_return value* value;
}

Task<std::string> text_on_pool(Scheduler& scheduler) {
  co_await scheduler.schedule();
  co_return "text";
}

Task<void> increment_on_pool(Scheduler& scheduler, std::atomic<int>& counter) {
  co_await scheduler.schedule();
  counter.fetch_add(1, std::memory_order_relaxed);
}

TEST(WhenAll, HeterogeneousTasksGiveATupleInArgumentOrder) {
  Scheduler scheduler(2);
  std::atomic<int> counter{0};
  auto [square, text, nothing] =
      sync_wait(when_all(square_on_pool(scheduler, 3), text_on_pool(scheduler), increment_on_pool(scheduler, counter)));
  EXPECT_EQ(square, 9);
  EXPECT_EQ(text, "text");
  EXPECT_EQ(nothing, std::monostate{});
  EXPECT_EQ(counter.load(), 1);
}

TEST(WhenAll, TenThousandTasksOnThePool) {
  Scheduler scheduler(2);
  constexpr int kTasks = 10'000;
  std::vector<Task<int>> tasks;
  tasks.reserve(kTasks);
  for (int i = 0; i < kTasks; ++i) tasks.push_back(square_on_pool(scheduler, i % 100));
  const std::vector<int> squares = sync_wait(when_all(std::move(tasks)));
  ASSERT_EQ(squares.size(), static_cast<std::size_t>(kTasks));
  for (int i = 0; i < kTasks; ++i) ASSERT_EQ(squares[i], (i % 100) * (i % 100)) << "result " << i << " out of order";
}

TEST(WhenAll, EmptyRangeCompletesAtOnce) { EXPECT_TRUE(sync_wait(when_all(std::vector<Task<int>>{})).empty()); }

Task<int> fails_on_pool(Scheduler& scheduler, std::string message) {
  co_await scheduler.schedule();
  throw std::runtime_error(message);
}

TEST(WhenAll, RethrowsTheFirstFailureAfterEveryTaskFinished) {
  Scheduler scheduler(2);
  std::atomic<int> counter{0};
  std::vector<Task<void>> tasks;
  for (int i = 0; i < 50; ++i) tasks.push_back(increment_on_pool(scheduler, counter));
  auto failing = [](Scheduler& pool, std::string message) -> Task<void> { co_await fails_on_pool(pool, message); };
  tasks.insert(tasks.begin() + 10, failing(scheduler, "first"));
  tasks.push_back(failing(scheduler, "second"));
  try {
    sync_wait(when_all(std::move(tasks)));
    FAIL() << "expected the failure to propagate";
  } catch (const std::runtime_error& error) { EXPECT_STREQ(error.what(), "first"); }
  EXPECT_EQ(counter.load(), 50) << "the other tasks must still run to completion";
}

TEST(WhenAll, SynchronouslyCompletingTasksDoNotSuspend) {
  auto ready = [](int value) -> Task<int> { co_return value; };
  std::vector<Task<int>> tasks;
  for (int i = 0; i < 1000; ++i) tasks.push_back(ready(i));
  const std::vector<int> values = sync_wait(when_all(std::move(tasks)));
  EXPECT_EQ(std::accumulate(values.begin(), values.end(), 0), 999 * 1000 / 2);
}

}  // namespace
}  // namespace aotpipe
