#pragma once
// CoroutineOwner<Promise>: the return object of the small internal coroutines (sync_wait's
// waiter, when_all's children). It owns the frame, destroys it once, and starts it lazily.
#include <aotpipe/pipeline/task.h>

#include <coroutine>
#include <utility>

namespace aotpipe::detail {

template <typename Promise>
class CoroutineOwner {
 public:
  using promise_type = Promise;

  explicit CoroutineOwner(std::coroutine_handle<Promise> handle) noexcept : handle_(handle) {}
  CoroutineOwner(CoroutineOwner&& other) noexcept : handle_(std::exchange(other.handle_, {})) {}
  CoroutineOwner(const CoroutineOwner&) = delete;
  CoroutineOwner& operator=(const CoroutineOwner&) = delete;
  ~CoroutineOwner() {
    if (handle_) handle_.destroy();
  }

  Promise& promise() const noexcept { return handle_.promise(); }
  void start() { resume_from_outside(handle_); }

 private:
  std::coroutine_handle<Promise> handle_;
};

// The parts every such promise shares: lazy start, the owner as return object, and a body
// that cannot throw (it only awaits when_ready()).
template <typename Promise>
struct LazyOwnedPromise {
  CoroutineOwner<Promise> get_return_object() noexcept {
    return CoroutineOwner<Promise>(std::coroutine_handle<Promise>::from_promise(static_cast<Promise&>(*this)));
  }
  std::suspend_always initial_suspend() noexcept { return {}; }
  void return_void() noexcept {}
  void unhandled_exception() noexcept { std::terminate(); }
};

}  // namespace aotpipe::detail
