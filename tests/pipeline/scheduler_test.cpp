#include <aotpipe/pipeline/asio_bridge.h>
#include <aotpipe/pipeline/errors.h>
#include <aotpipe/pipeline/scheduler.h>
#include <aotpipe/pipeline/sync_wait.h>
#include <aotpipe/pipeline/when_all.h>

#include <boost/asio/post.hpp>
#include <gtest/gtest.h>

#include <chrono>
#include <mutex>
#include <set>
#include <thread>

namespace aotpipe {
namespace {

using namespace std::chrono_literals;

Task<std::thread::id> thread_after_schedule(Scheduler& scheduler) {
  co_await scheduler.schedule();
  co_return std::this_thread::get_id();
}

TEST(Scheduler, ScheduleMovesTheTaskOntoThePool) {
  Scheduler scheduler(2);
  auto check = [](Scheduler& pool) -> Task<bool> {
    co_await pool.schedule();
    co_return pool.runs_on_current_thread();
  };
  EXPECT_TRUE(sync_wait(check(scheduler)));
  EXPECT_NE(sync_wait(thread_after_schedule(scheduler)), std::this_thread::get_id());
  EXPECT_FALSE(scheduler.runs_on_current_thread());
}

TEST(Scheduler, UsesNoMoreThreadsThanConfigured) {
  for (std::size_t threads : {1u, 3u}) {
    Scheduler scheduler(threads);
    std::vector<Task<std::thread::id>> tasks;
    for (int i = 0; i < 500; ++i) tasks.push_back(thread_after_schedule(scheduler));
    const auto ids = sync_wait(when_all(std::move(tasks)));
    EXPECT_LE(std::set<std::thread::id>(ids.begin(), ids.end()).size(), threads);
    EXPECT_EQ(scheduler.num_threads(), threads);
  }
}

TEST(Scheduler, RejectsZeroThreads) { EXPECT_THROW(Scheduler(0), std::invalid_argument); }

TEST(Scheduler, SyncWaitOnAPoolThreadIsRefused) {
  Scheduler scheduler(1);
  auto nested_blocking_wait = [](Scheduler& pool) -> Task<void> {
    co_await pool.schedule();
    sync_wait(thread_after_schedule(pool));
  };
  EXPECT_THROW(sync_wait(nested_blocking_wait(scheduler)), std::logic_error);
}

TEST(AsioBridge, TimerCompletionResumesOnThePool) {
  Scheduler scheduler(2);
  auto wait_on_timer = [](Scheduler& pool) -> Task<bool> {
    boost::asio::steady_timer timer(pool.io_context(), 1ms);
    co_await timer.async_wait(use_task(pool));
    co_return pool.runs_on_current_thread();
  };
  EXPECT_TRUE(sync_wait(wait_on_timer(scheduler)));
}

TEST(AsioBridge, ReturnsHandlerArgumentsAndThrowsErrorCodes) {
  Scheduler scheduler(1);
  auto round_trip = [](Scheduler& pool) -> Task<int> {
    UseTask token = use_task(pool);
    // A hand-written initiation completing with (error_code, int), posted to the io thread.
    co_return co_await boost::asio::async_initiate<UseTask, void(boost::system::error_code, int)>(
        [&pool](auto handler) {
          boost::asio::post(pool.io_context(),
                            [handler = std::move(handler)]() mutable { handler(boost::system::error_code{}, 42); });
        },
        token);
  };
  EXPECT_EQ(sync_wait(round_trip(scheduler)), 42);

  auto failing = [](Scheduler& pool) -> Task<void> {
    UseTask token = use_task(pool);
    co_await boost::asio::async_initiate<UseTask, void(boost::system::error_code)>(
        [&pool](auto handler) {
          boost::asio::post(pool.io_context(), [handler = std::move(handler)]() mutable {
            handler(make_error_code(boost::asio::error::connection_refused));
          });
        },
        token);
  };
  EXPECT_THROW(sync_wait(failing(scheduler)), boost::system::system_error);
}

TEST(AsioBridge, SleepEndsEarlyWhenStopIsRequested) {
  Scheduler scheduler(2);
  std::stop_source stop;
  auto long_sleep = [](Scheduler& pool, std::stop_token token) -> Task<void> {
    co_await pool.schedule();
    co_await sleep_for(pool, 1h, token);
  };
  auto stop_soon = [](Scheduler& pool, std::stop_source source) -> Task<void> {
    co_await sleep_for(pool, 5ms);
    source.request_stop();
  };
  EXPECT_THROW(sync_wait(when_all(long_sleep(scheduler, stop.get_token()), stop_soon(scheduler, stop))),
               OperationCancelled);
}

TEST(AsioBridge, SleepCompletesWithoutStop) {
  Scheduler scheduler(1);
  auto short_sleep = [](Scheduler& pool) -> Task<bool> {
    co_await sleep_for(pool, 1ms);
    co_return pool.runs_on_current_thread();
  };
  EXPECT_TRUE(sync_wait(short_sleep(scheduler)));
}

}  // namespace
}  // namespace aotpipe
