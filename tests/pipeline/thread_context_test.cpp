#include <aotpipe/pipeline/asio_bridge.h>
#include <aotpipe/pipeline/scheduler.h>
#include <aotpipe/pipeline/sync_wait.h>
#include <aotpipe/pipeline/thread_context.h>
#include <aotpipe/pipeline/when_all.h>

#include <gtest/gtest.h>

#include <chrono>
#include <thread>

namespace aotpipe {
namespace {

using namespace std::chrono_literals;

// Stands in for at::ThreadLocalState (grad mode, dispatch keys, current stream).
thread_local int tls_setting = 0;

ContextPropagatorRegistration propagate_tls_setting() {
  return register_context_propagator({.name = "tls_setting",
                                      .capture = [] { return std::any(tls_setting); },
                                      .restore = [](std::any& saved) { tls_setting = std::any_cast<int>(saved); }});
}

struct Observed {
  int after_first_hop;
  int after_timer;
  std::thread::id first_thread;
};

// Reads the setting after moving to the pool, sets its own, then suspends on a timer (resumed
// through the I/O thread onto possibly another pool thread) and reads it again.
Task<Observed> observe_setting_across_suspensions(Scheduler& scheduler, int own_setting) {
  Observed observed{};
  co_await scheduler.schedule();
  observed.after_first_hop = tls_setting;
  observed.first_thread = std::this_thread::get_id();
  tls_setting = own_setting;
  co_await sleep_for(scheduler, 1ms);
  observed.after_timer = tls_setting;
  co_return observed;
}

TEST(ThreadContext, FollowsTheCoroutineOntoAnotherThread) {
  const auto registration = propagate_tls_setting();
  Scheduler scheduler(2);
  tls_setting = 42;
  const Observed observed = sync_wait(observe_setting_across_suspensions(scheduler, 7));
  EXPECT_NE(observed.first_thread, std::this_thread::get_id()) << "the test needs a real thread switch";
  EXPECT_EQ(observed.after_first_hop, 42);
  EXPECT_EQ(observed.after_timer, 7);
  tls_setting = 0;
}

TEST(ThreadContext, ConcurrentCoroutinesEachKeepTheirOwnState) {
  const auto registration = propagate_tls_setting();
  Scheduler scheduler(2);
  auto keeps_own_value = [](Scheduler& pool, int value) -> Task<bool> {
    co_await pool.schedule();
    tls_setting = value;
    bool kept = true;
    for (int i = 0; i < 20; ++i) {
      co_await pool.schedule();  // other coroutines run on this thread meanwhile
      kept = kept && tls_setting == value;
    }
    co_return kept;
  };
  std::vector<Task<bool>> tasks;
  for (int value = 1; value <= 64; ++value) tasks.push_back(keeps_own_value(scheduler, value));
  for (bool kept : sync_wait(when_all(std::move(tasks)))) EXPECT_TRUE(kept);
}

TEST(ThreadContext, NotCarriedWithoutAPropagator) {
  Scheduler scheduler(2);
  tls_setting = 42;
  const Observed observed = sync_wait(observe_setting_across_suspensions(scheduler, 7));
  EXPECT_NE(observed.after_first_hop, 42) << "pool threads have their own thread_local";
  tls_setting = 0;
}

TEST(ThreadContext, UnregisteringStopsPropagation) {
  { const auto registration = propagate_tls_setting(); }
  EXPECT_TRUE(ThreadContextSnapshot::capture().empty());
}

}  // namespace
}  // namespace aotpipe
