#include <aotpipe/pipeline/scheduler.h>

#include <aotpipe/pipeline/asio_bridge.h>
#include <aotpipe/pipeline/task.h>

#include <oneapi/tbb/global_control.h>
#include <oneapi/tbb/info.h>
#include <oneapi/tbb/task_arena.h>
#include <oneapi/tbb/task_group.h>

#include <atomic>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <thread>

#if defined(__SANITIZE_THREAD__)
// libtbb is not instrumented, so ThreadSanitizer sees neither that the thread enqueueing a
// coroutine happens-before the worker resuming it, nor that oneTBB recycles a finished task's
// memory for the next one only after its worker is done with it. The first is stated with
// acquire/release on the coroutine frame; the second by not recording the accesses oneTBB's
// inline code makes to its own task objects while enqueueing.
extern "C" void __tsan_acquire(void* addr);
extern "C" void __tsan_release(void* addr);
extern "C" void __tsan_ignore_thread_begin();
extern "C" void __tsan_ignore_thread_end();
#endif

namespace aotpipe {
namespace {

thread_local const Scheduler* current_pool_scheduler = nullptr;

void announce_handoff([[maybe_unused]] void* address) {
#if defined(__SANITIZE_THREAD__)
  __tsan_release(address);
#endif
}
void accept_handoff([[maybe_unused]] void* address) {
#if defined(__SANITIZE_THREAD__)
  __tsan_acquire(address);
#endif
}

// Runs `enqueue` with oneTBB's own bookkeeping hidden from ThreadSanitizer (see above).
template <typename Enqueue>
void enqueue_into_tbb(Enqueue&& enqueue) {
#if defined(__SANITIZE_THREAD__)
  __tsan_ignore_thread_begin();
  std::forward<Enqueue>(enqueue)();
  __tsan_ignore_thread_end();
#else
  std::forward<Enqueue>(enqueue)();
#endif
}

}  // namespace

struct Scheduler::Impl {
  explicit Impl(std::size_t threads)
      : num_threads(threads),
        // oneTBB caps all arenas together at default_concurrency() - 1 workers; a scheduler
        // asking for more threads than that raises the process-wide cap while it lives.
        parallelism_cap(threads + 1 > default_thread_count()
                            ? std::optional<tbb::global_control>(
                                  std::in_place, tbb::global_control::max_allowed_parallelism, threads + 1)
                            : std::nullopt),
        // No slot is reserved for an external thread: nobody joins the arena, all the work is
        // enqueued, so every slot is a worker.
        arena(static_cast<int>(threads), /*reserved_for_masters=*/0) {}

  std::size_t num_threads;
  std::optional<tbb::global_control> parallelism_cap;
  tbb::task_arena arena;
  // Resumptions requested from pool threads; waited for (through the arena) on destruction.
  tbb::task_group spawned;
  std::atomic<std::size_t> pending_resumptions{0};
  std::once_flag io_started;
  std::unique_ptr<AsioIoThread> io;
};

std::size_t Scheduler::default_thread_count() { return static_cast<std::size_t>(tbb::info::default_concurrency()); }

Scheduler::Scheduler(std::size_t num_threads) {
  if (num_threads == 0) throw std::invalid_argument("Scheduler needs at least one thread");
  impl_ = std::make_unique<Impl>(num_threads);
}

Scheduler::~Scheduler() {
  // Stop the I/O thread first: its completions enqueue resumptions.
  impl_->io.reset();
  while (impl_->pending_resumptions.load(std::memory_order_acquire) != 0) std::this_thread::yield();
  // The counter reaches zero inside the last task; the task_group's bookkeeping of it ends
  // just after. Waiting from outside the arena only waits (all the work is done), and its
  // release/acquire pair is inline code that ThreadSanitizer sees.
  impl_->spawned.wait();
}

std::size_t Scheduler::num_threads() const noexcept { return impl_->num_threads; }

void Scheduler::enqueue(std::coroutine_handle<> handle) {
  impl_->pending_resumptions.fetch_add(1, std::memory_order_relaxed);
  announce_handoff(handle.address());
  auto resume = [this, handle] {
    accept_handoff(handle.address());
    const Scheduler* previous = std::exchange(current_pool_scheduler, this);
    detail::resume_from_outside(handle);
    current_pool_scheduler = previous;
    // Last touch of the scheduler: the destructor may return as soon as this reaches zero.
    impl_->pending_resumptions.fetch_sub(1, std::memory_order_release);
  };
  enqueue_into_tbb([&] {
    if (runs_on_current_thread()) {
      // From one of our workers: spawn into its own deque, which it (or a thief) runs as soon
      // as the current task returns. arena.enqueue would go through the arena's shared queue
      // and, once the worker had gone idle, a wake-up by the OS: milliseconds per hop on a
      // loaded machine.
      impl_->spawned.run(std::move(resume));
    } else {
      impl_->arena.enqueue(std::move(resume));
    }
  });
}

bool Scheduler::runs_on_current_thread() const noexcept { return current_pool_scheduler == this; }

bool Scheduler::on_any_pool_thread() noexcept { return current_pool_scheduler != nullptr; }

boost::asio::io_context& Scheduler::io_context() {
  std::call_once(impl_->io_started, [this] { impl_->io = std::make_unique<AsioIoThread>(); });
  return impl_->io->context();
}

}  // namespace aotpipe
