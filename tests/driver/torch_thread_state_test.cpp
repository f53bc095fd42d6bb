// libtorch thread-local settings survive a coroutine's hops between pool threads.
#include <aotpipe/pipeline/asio_bridge.h>
#include <aotpipe/pipeline/scheduler.h>
#include <aotpipe/pipeline/sync_wait.h>
#include <aotpipe/pipeline/task.h>
#include <aotpipe/pipeline/when_all.h>
#include <aotpipe/driver/torch_thread_state.h>

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>
#include <c10/core/impl/LocalDispatchKeySet.h>
#include <gtest/gtest.h>

#include <atomic>
#include <set>
#include <thread>

namespace aotpipe {
namespace {

struct Seen {
  bool consistent = true;  // the settings read back equal the ones this task set, after every hop
  std::set<std::thread::id> threads;
};

// Counts how often consecutive resumptions belong to different tasks: only then can one
// task's settings leak into another's.
struct Interleaving {
  std::atomic<int> last_task{-1};
  std::atomic<int> switches{0};
  void resumed(int task) {
    if (last_task.exchange(task) != task) switches.fetch_add(1);
  }
};

// Sets thread-local torch state, suspends many times, and reports what it sees.
Task<Seen> hop_with_settings(Scheduler& scheduler, int task, Interleaving& interleaving) {
  const bool grad_enabled = task % 2 == 0;
  Seen seen;
  co_await scheduler.schedule();
  c10::GradMode::set_enabled(grad_enabled);
  c10::impl::tls_set_dispatch_key_included(c10::DispatchKey::Fake, !grad_enabled);
  for (int i = 0; i < 50; ++i) {
    // A timer suspends for real (a pool hop from a worker may just continue inline): the
    // task resumes later, on whichever thread, after others ran.
    co_await sleep_for(scheduler, std::chrono::microseconds(200));
    interleaving.resumed(task);
    seen.threads.insert(std::this_thread::get_id());
    seen.consistent = seen.consistent && c10::GradMode::is_enabled() == grad_enabled &&
                      c10::impl::tls_is_dispatch_key_included(c10::DispatchKey::Fake) == !grad_enabled;
  }
  // Leave the pool thread clean for whoever runs next.
  c10::GradMode::set_enabled(true);
  c10::impl::tls_set_dispatch_key_included(c10::DispatchKey::Fake, false);
  co_return seen;
}

struct RunResult {
  std::vector<Seen> seen;
  int switches;
};

RunResult run_tasks() {
  Scheduler scheduler(2);
  Interleaving interleaving;
  std::vector<Task<Seen>> tasks;
  for (int i = 0; i < 8; ++i) tasks.push_back(hop_with_settings(scheduler, i, interleaving));
  auto seen = sync_wait(when_all(std::move(tasks)));
  return {std::move(seen), interleaving.switches.load()};
}

TEST(TorchThreadState, GradModeAndDispatchKeysFollowTheCoroutine) {
  auto registration = propagate_torch_thread_state();
  RunResult run = run_tasks();
  // Meaningful only if tasks really interleaved on the pool's threads.
  EXPECT_GT(run.switches, 8);
  for (std::size_t i = 0; i < run.seen.size(); ++i) EXPECT_TRUE(run.seen[i].consistent) << "task " << i;
}

TEST(TorchThreadState, WithoutThePropagatorSettingsLeakBetweenTasks) {
  // The control: the same tasks with nothing registered see each other's settings, which is
  // what the propagator prevents.
  RunResult run = run_tasks();
  ASSERT_GT(run.switches, 8);
  bool any_inconsistent = false;
  for (const Seen& s : run.seen) any_inconsistent = any_inconsistent || !s.consistent;
  EXPECT_TRUE(any_inconsistent);
}

}  // namespace
}  // namespace aotpipe
