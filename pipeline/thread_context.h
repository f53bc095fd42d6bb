#pragma once
// Thread-local state that follows a coroutine across suspensions.
//
// A coroutine may suspend on one thread and resume on another (a pool hop, a timer, I/O).
// Thread-local settings the code relies on (for libtorch: grad mode, dispatch key sets, the
// current CUDA stream, all held in at::ThreadLocalState) would silently change under it. The
// pipeline does not know these settings; instead any component registers a ContextPropagator,
// and every co_await inside a Task<T> does:
//
//   on suspension (on the suspending thread):  state_i = propagator_i.capture()
//   on resumption (on the resuming thread):    propagator_i.restore(state_i)
//
// Contract for a propagator:
// - capture() and restore() run on pool threads, concurrently for different coroutines; each
//   call touches only the calling thread's state (and its own snapshot), never shared state.
// - capture() is cheap: it runs at every suspension. It must not throw.
// - restore() runs exactly once per capture(), just before the coroutine continues. It sets the
//   state; it does not undo it when the coroutine suspends again. Pool threads therefore keep
//   the last restored state, which is harmless because every coroutine restores its own first.
// - Registration is rare (start-up, tests) and thread-safe; a coroutine suspended while the set
//   changes restores exactly the states it captured.
#include <any>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace aotpipe {

struct ContextPropagator {
  std::string name;
  std::function<std::any()> capture;
  std::function<void(std::any& snapshot)> restore;
};

namespace detail {
struct PropagatorSet;
}

// Keeps a propagator registered; unregisters it when destroyed. Move-only.
class [[nodiscard]] ContextPropagatorRegistration {
 public:
  ContextPropagatorRegistration() = default;
  ContextPropagatorRegistration(ContextPropagatorRegistration&& other) noexcept;
  ContextPropagatorRegistration& operator=(ContextPropagatorRegistration&& other) noexcept;
  ContextPropagatorRegistration(const ContextPropagatorRegistration&) = delete;
  ContextPropagatorRegistration& operator=(const ContextPropagatorRegistration&) = delete;
  ~ContextPropagatorRegistration();

  // Leaves the propagator registered for the rest of the process.
  void release() noexcept { id_ = 0; }

 private:
  friend ContextPropagatorRegistration register_context_propagator(ContextPropagator);
  explicit ContextPropagatorRegistration(std::uint64_t id) : id_(id) {}
  std::uint64_t id_ = 0;
};

ContextPropagatorRegistration register_context_propagator(ContextPropagator propagator);

// The captured states of every registered propagator, taken on the current thread.
class ThreadContextSnapshot {
 public:
  ThreadContextSnapshot() = default;
  static ThreadContextSnapshot capture();
  // Restores every captured state onto the current thread; a second call does nothing.
  void restore();
  bool empty() const noexcept { return states_.empty(); }

 private:
  const detail::PropagatorSet* propagators_ = nullptr;
  std::vector<std::any> states_;
};

}  // namespace aotpipe
