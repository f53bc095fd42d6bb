#pragma once
// Task<T>: a lazy, move-only coroutine returning T (or throwing).
//
// - Lazy: the body starts when the task is awaited (or handed to sync_wait / when_all), so a
//   Task can be built, stored and passed around before anything runs.
// - Symmetric transfer: awaiting a task jumps into it, and its completion jumps back into the
//   awaiter, both as tail calls (await_suspend returns the next coroutine handle). A loop of
//   a million synchronously completing awaits therefore runs in constant stack. Where the
//   compiler cannot emit those tail calls (ThreadSanitizer wraps every function in entry/exit
//   calls), a trampoline gives the same guarantee: see detail::transfer_to.
// - Exceptions escaping the body are stored and rethrown from `co_await` in the awaiter.
// - Every co_await inside a Task captures the registered thread context before suspending and
//   restores it on resumption (see thread_context.h), whatever thread resumes it.
#include <aotpipe/pipeline/thread_context.h>

#include <coroutine>
#include <exception>
#include <type_traits>
#include <utility>
#include <variant>

namespace aotpipe {

template <typename T = void>
class Task;

namespace detail {

// GCC emits the tail calls of symmetric transfer only in optimized builds without ASan/TSan
// instrumentation (both wrap calls in code that runs after them). Elsewhere: trampolines.
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__) || !defined(__OPTIMIZE__) || \
    defined(AOTPIPE_FORCE_TRAMPOLINE)
inline constexpr bool kTrampolineTransfers = true;
#else
inline constexpr bool kTrampolineTransfers = false;
#endif

// The coroutine a trampolined transfer is to run next on this thread.
inline std::coroutine_handle<>& pending_transfer() noexcept {
  thread_local std::coroutine_handle<> next;
  return next;
}

// What await_suspend returns to transfer control to `next`: `next` itself (a tail call), or,
// with trampolines, noop after leaving `next` for the trampoline in resume_from_outside().
inline std::coroutine_handle<> transfer_to(std::coroutine_handle<> next) noexcept {
  if constexpr (kTrampolineTransfers) {
    pending_transfer() = next;
    return std::noop_coroutine();
  } else {
    return next;
  }
}

// Resumes a coroutine from ordinary code (a pool task, sync_wait, a combinator starting its
// children) and runs the transfers it leaves behind. Every resume() outside an awaiter goes
// through here. It drains the slot even in builds without trampolines, so translation units
// compiled with different settings still work together.
inline void resume_from_outside(std::coroutine_handle<> handle) {
  handle.resume();
  while (std::coroutine_handle<> next = std::exchange(pending_transfer(), {})) next.resume();
}

// The awaiter of `co_await expr`: expr.operator co_await() when it has one, else expr itself.
template <typename Awaitable>
decltype(auto) get_awaiter(Awaitable&& awaitable) {
  if constexpr (requires { std::forward<Awaitable>(awaitable).operator co_await(); }) {
    return std::forward<Awaitable>(awaitable).operator co_await();
  } else {
    return std::forward<Awaitable>(awaitable);
  }
}

// Wraps any awaiter so the coroutine gets its thread context back when it resumes.
template <typename Awaiter>
class ContextRestoringAwaiter {
 public:
  template <typename A>
  explicit ContextRestoringAwaiter(A&& inner) : inner_(std::forward<A>(inner)) {}

  bool await_ready() { return inner_.await_ready(); }

  template <typename Promise>
  auto await_suspend(std::coroutine_handle<Promise> handle) {
    // Captured before the inner awaiter runs: once it has, another thread may already have
    // resumed the coroutine.
    snapshot_ = ThreadContextSnapshot::capture();
    return inner_.await_suspend(handle);
  }

  decltype(auto) await_resume() {
    // Moved out first: GCC 12 may destroy the awaiters of a co_await twice when await_resume
    // throws, which must then find nothing left to free (see docs/pipeline.md, "GCC 12").
    ThreadContextSnapshot snapshot = std::move(snapshot_);
    snapshot.restore();
    return inner_.await_resume();
  }

 private:
  Awaiter inner_;
  ThreadContextSnapshot snapshot_;
};

class TaskPromiseBase {
 public:
  std::suspend_always initial_suspend() noexcept { return {}; }

  struct FinalAwaiter {
    bool await_ready() noexcept { return false; }
    template <typename Promise>
    std::coroutine_handle<> await_suspend(std::coroutine_handle<Promise> finished) noexcept {
      return transfer_to(finished.promise().continuation_);
    }
    void await_resume() noexcept {}
  };
  FinalAwaiter final_suspend() noexcept { return {}; }

  template <typename Awaitable>
  auto await_transform(Awaitable&& awaitable) {
    using Awaiter = decltype(get_awaiter(std::forward<Awaitable>(awaitable)));
    return ContextRestoringAwaiter<Awaiter>(get_awaiter(std::forward<Awaitable>(awaitable)));
  }

  void set_continuation(std::coroutine_handle<> continuation) noexcept { continuation_ = continuation; }

 private:
  std::coroutine_handle<> continuation_ = std::noop_coroutine();
};

template <typename T>
class TaskPromise final : public TaskPromiseBase {
 public:
  Task<T> get_return_object() noexcept;

  template <typename U>
  requires std::convertible_to<U&&, T>
  void return_value(U&& value) { result_.template emplace<1>(std::forward<U>(value)); }
  // Emplacing an exception_ptr cannot throw; clang-tidy follows the variant's reset of a T into
  // libstdc++'s bad_variant_access throw, which a valid variant never reaches.
  // NOLINTNEXTLINE(bugprone-exception-escape)
  void unhandled_exception() noexcept { result_.template emplace<2>(std::current_exception()); }

  T take_result() {
    if (result_.index() == 2) std::rethrow_exception(std::get<2>(result_));
    return std::move(std::get<1>(result_));
  }

 private:
  std::variant<std::monostate, T, std::exception_ptr> result_;
};

template <>
class TaskPromise<void> final : public TaskPromiseBase {
 public:
  Task<void> get_return_object() noexcept;
  void return_void() noexcept {}
  void unhandled_exception() noexcept { error_ = std::current_exception(); }
  void take_result() {
    if (error_) std::rethrow_exception(error_);
  }

 private:
  std::exception_ptr error_;
};

}  // namespace detail

template <typename T>
class [[nodiscard]] Task {
  static_assert(!std::is_reference_v<T>, "Task<T&> is not supported: return a pointer or a value");

 public:
  using promise_type = detail::TaskPromise<T>;
  using value_type = T;

  Task() = default;
  explicit Task(std::coroutine_handle<promise_type> handle) noexcept : handle_(handle) {}
  Task(Task&& other) noexcept : handle_(std::exchange(other.handle_, {})) {}
  Task& operator=(Task&& other) noexcept {
    if (this != &other) {
      destroy();
      handle_ = std::exchange(other.handle_, {});
    }
    return *this;
  }
  Task(const Task&) = delete;
  Task& operator=(const Task&) = delete;
  ~Task() { destroy(); }

  bool valid() const noexcept { return static_cast<bool>(handle_); }
  bool done() const noexcept { return handle_ && handle_.done(); }

  // `co_await std::move(task)`: runs the task and returns its value or rethrows its exception.
  auto operator co_await() && noexcept {
    struct ResultAwaiter : StartAwaiter {
      T await_resume() { return this->handle.promise().take_result(); }
    };
    return ResultAwaiter{{handle_}};
  }

  // Awaits completion without fetching the result (used by combinators, which then call
  // take_result()). Never throws.
  auto when_ready() noexcept { return StartAwaiter{handle_}; }

  // The value, or the stored exception rethrown. Only after completion.
  T take_result() { return handle_.promise().take_result(); }

 private:
  struct StartAwaiter {
    std::coroutine_handle<promise_type> handle;
    bool await_ready() const noexcept { return !handle || handle.done(); }
    std::coroutine_handle<> await_suspend(std::coroutine_handle<> awaiting) noexcept {
      handle.promise().set_continuation(awaiting);
      return detail::transfer_to(handle);
    }
    void await_resume() noexcept {}
  };

  void destroy() noexcept {
    if (handle_) handle_.destroy();
  }

  std::coroutine_handle<promise_type> handle_;
};

namespace detail {
template <typename T>
Task<T> TaskPromise<T>::get_return_object() noexcept {
  return Task<T>{std::coroutine_handle<TaskPromise<T>>::from_promise(*this)};
}
inline Task<void> TaskPromise<void>::get_return_object() noexcept {
  return Task<void>{std::coroutine_handle<TaskPromise<void>>::from_promise(*this)};
}
}  // namespace detail

// The value type of a task as stored in containers: void becomes std::monostate.
template <typename T>
using NonVoid = std::conditional_t<std::is_void_v<T>, std::monostate, T>;

// take_result() as a value even for Task<void>.
template <typename T>
NonVoid<T> take_non_void_result(Task<T>& task) {
  if constexpr (std::is_void_v<T>) {
    task.take_result();
    return {};
  } else {
    return task.take_result();
  }
}

}  // namespace aotpipe
