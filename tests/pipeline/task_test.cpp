#include <aotpipe/pipeline/scheduler.h>
#include <aotpipe/pipeline/sync_wait.h>
#include <aotpipe/pipeline/task.h>

#include <gtest/gtest.h>

#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace aotpipe {
namespace {

Task<int> value_of(int value) { co_return value; }

Task<int> sum_of_two(std::vector<std::string>& log) {
  log.push_back("start");
  const int a = co_await value_of(1);
  log.push_back("after first");
  const int b = co_await value_of(2);
  log.push_back("after second");
  co_return a + b;
}

TEST(Task, IsLazyAndRunsInOrder) {
  std::vector<std::string> log;
  Task<int> task = sum_of_two(log);
  EXPECT_TRUE(log.empty()) << "the body must not start before the task is awaited";
  EXPECT_EQ(sync_wait(std::move(task)), 3);
  EXPECT_EQ(log, (std::vector<std::string>{"start", "after first", "after second"}));
}

Task<void> throws_logic_error() {
  throw std::logic_error("boom");
  co_return;
}

Task<std::string> catches_from_awaited_task() {
  try {
    co_await throws_logic_error();
  } catch (const std::logic_error& error) { co_return std::string("caught ") + error.what(); }
  co_return "not caught";
}

TEST(Task, ExceptionReachesTheAwaiter) {
  EXPECT_EQ(sync_wait(catches_from_awaited_task()), "caught boom");
  EXPECT_THROW(sync_wait(throws_logic_error()), std::logic_error);
}

Task<std::unique_ptr<int>> move_only_value() { co_return std::make_unique<int>(7); }

TEST(Task, CarriesMoveOnlyValues) { EXPECT_EQ(*sync_wait(move_only_value()), 7); }

TEST(Task, DestroyingAnUnstartedTaskNeverRunsIt) {
  bool ran = false;
  {
    auto body = [](bool& flag) -> Task<void> {
      flag = true;
      co_return;
    };
    Task<void> task = body(ran);
    Task<void> moved = std::move(task);
    EXPECT_FALSE(task.valid());
    EXPECT_TRUE(moved.valid());
  }
  EXPECT_FALSE(ran);
}

// Without symmetric transfer each synchronously completing await would nest a resume() call
// in the previous one: 100,000 of them overflow an 8 MiB stack (and ASan's larger frames).
constexpr int kLongChain = 100'000;

Task<long> long_loop_of_awaits() {
  long total = 0;
  for (int i = 0; i < kLongChain; ++i) total += co_await value_of(1);
  co_return total;
}

TEST(Task, LongLoopOfAwaitsDoesNotGrowTheStack) { EXPECT_EQ(sync_wait(long_loop_of_awaits()), kLongChain); }

Task<long> recursive_chain(int depth) {
  if (depth == 0) co_return 0;
  co_return 1 + co_await recursive_chain(depth - 1);
}

TEST(Task, DeepRecursiveChainOfAwaitsDoesNotGrowTheStack) {
  EXPECT_EQ(sync_wait(recursive_chain(kLongChain)), kLongChain);
}

TEST(Task, LongChainAcrossThePool) {
  Scheduler scheduler(2);
  auto on_pool = [](Scheduler& pool) -> Task<long> {
    co_await pool.schedule();
    co_return co_await long_loop_of_awaits();
  };
  EXPECT_EQ(sync_wait(on_pool(scheduler)), kLongChain);
}

}  // namespace
}  // namespace aotpipe
