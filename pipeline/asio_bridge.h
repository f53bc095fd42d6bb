#pragma once
// The bridge between Boost.Asio and aotpipe coroutines.
//
// Choice: a completion token, `use_task(scheduler)`, rather than asio::awaitable/co_spawn.
// Asio's own coroutines (asio::awaitable) only run inside Asio's executors and can only await
// other asio::awaitables, so a Task<T> could not await them without spawning a second
// coroutine per operation and a hop through an Asio thread. A completion token plugs into
// every Asio asynchronous operation instead (timers, sockets, strands, resolvers, channels):
//
//   co_await timer.async_wait(aotpipe::use_task(scheduler));
//   auto bytes = co_await socket.async_read_some(buffer, aotpipe::use_task(scheduler));
//
// The operation is initiated when the Task awaits it; its completion handler, which runs on
// the io_context thread, stores the results and enqueues the Task back onto the scheduler's
// pool. So stage code never runs on the I/O thread, and the usual thread-context propagation
// of Task<T> applies. An error_code first argument that is set is thrown as
// boost::system::system_error; the remaining arguments are returned (nothing, one value, or a
// std::tuple).
#include <aotpipe/pipeline/scheduler.h>
#include <aotpipe/pipeline/task.h>

#include <boost/asio/async_result.hpp>
#include <boost/asio/error.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/system/system_error.hpp>

#include <chrono>
#include <memory>
#include <optional>
#include <stop_token>
#include <thread>
#include <tuple>

namespace aotpipe {

// One io_context served by one thread, for the lifetime of the object.
class AsioIoThread {
 public:
  AsioIoThread();
  ~AsioIoThread();
  AsioIoThread(const AsioIoThread&) = delete;
  AsioIoThread& operator=(const AsioIoThread&) = delete;
  boost::asio::io_context& context() noexcept { return context_; }

 private:
  boost::asio::io_context context_;
  boost::asio::executor_work_guard<boost::asio::io_context::executor_type> keep_running_;
  std::thread thread_;
};

// The completion token: resume the awaiting Task on `scheduler` when the operation completes.
struct UseTask {
  Scheduler* scheduler;
};
inline UseTask use_task(Scheduler& scheduler) noexcept { return UseTask{&scheduler}; }

namespace detail {

template <typename... Args>
struct AsioResults {
  using Stored = std::tuple<std::decay_t<Args>...>;
  static auto unpack(Stored&& values) {
    if constexpr (sizeof...(Args) == 0) {
      return;
    } else if constexpr (sizeof...(Args) == 1) {
      return std::get<0>(std::move(values));
    } else {
      return std::move(values);
    }
  }
};

template <typename... Args>
struct AsioResults<boost::system::error_code, Args...> {
  using Stored = std::tuple<boost::system::error_code, std::decay_t<Args>...>;
  static auto unpack(Stored&& values) {
    if (const auto& error = std::get<0>(values)) throw boost::system::system_error(error);
    return AsioResults<Args...>::unpack(
        std::apply([](auto&&, auto&&... rest) { return std::tuple<std::decay_t<Args>...>(std::move(rest)...); },
                   std::move(values)));
  }
};

// What an Asio operation started with use_task() returns: an awaiter that initiates the
// operation when awaited.
template <typename Initiation, typename InitArgs, typename... Args>
class [[nodiscard]] AsioOperation {
 public:
  AsioOperation(Scheduler& scheduler, Initiation initiation, InitArgs init_args)
      : scheduler_(&scheduler), initiation_(std::move(initiation)), init_args_(std::move(init_args)) {}

  bool await_ready() const noexcept { return false; }

  void await_suspend(std::coroutine_handle<> awaiting) {
    continuation_ = awaiting;
    // Moved out, so that once the operation is started this object owns nothing (see
    // await_resume). Nothing may touch `this` after the initiation: the completion can resume
    // the coroutine on another thread at once.
    Initiation initiation = std::move(initiation_);
    std::apply(
        [this, &initiation](auto&&... args) { std::move(initiation)(CompletionHandler{this}, std::move(args)...); },
        InitArgs(std::move(init_args_)));
  }

  auto await_resume() {
    // Taken out before unpack() may throw: GCC 12 can destroy a co_await's awaiter twice when
    // await_resume throws, and this object must then own nothing (see docs/pipeline.md).
    typename AsioResults<Args...>::Stored values = std::move(*results_);
    results_.reset();
    return AsioResults<Args...>::unpack(std::move(values));
  }

 private:
  struct CompletionHandler {
    AsioOperation* operation;
    void operator()(Args... args) {
      operation->results_.emplace(std::move(args)...);
      operation->scheduler_->enqueue(operation->continuation_);
    }
  };

  Scheduler* scheduler_;
  Initiation initiation_;
  InitArgs init_args_;
  std::coroutine_handle<> continuation_;
  std::optional<typename AsioResults<Args...>::Stored> results_;
};

}  // namespace detail

// A steady timer on its own strand. Every operation on the timer is posted to the strand, so
// it may be armed from a pool thread and cancelled from any thread (a stop callback, a
// deadline) without a data race. Shared ownership keeps it alive until its handler has run.
class StrandTimer : public std::enable_shared_from_this<StrandTimer> {
 public:
  static std::shared_ptr<StrandTimer> create(boost::asio::io_context& context,
                                             std::chrono::steady_clock::duration delay);

  // Starts the wait; `handler(error_code)` runs on the strand (operation_aborted if cancelled).
  template <typename Handler>
  void async_wait(Handler handler) {
    boost::asio::post(strand_, [self = shared_from_this(), handler = std::move(handler)]() mutable {
      if (self->cancelled_) {
        // cancel() overtook the wait on the strand: complete as a cancelled wait would.
        boost::asio::post(self->strand_,
                          [handler = std::move(handler)]() mutable { handler(boost::asio::error::operation_aborted); });
        return;
      }
      self->timer_.async_wait(std::move(handler));
    });
  }
  // Cancels the wait, whether it has started yet or not. Thread-safe.
  void cancel();

 private:
  StrandTimer(boost::asio::io_context& context, std::chrono::steady_clock::duration delay);
  boost::asio::strand<boost::asio::io_context::executor_type> strand_;
  boost::asio::steady_timer timer_;
  bool cancelled_ = false;  // touched only on the strand
};

// Suspends the task for `delay` without holding a pool thread. Throws OperationCancelled when
// `stop` is requested before the delay elapses.
Task<void> sleep_for(Scheduler& scheduler, std::chrono::steady_clock::duration delay, std::stop_token stop = {});

}  // namespace aotpipe

template <typename... Args>
class boost::asio::async_result<aotpipe::UseTask, void(Args...)> {
 public:
  template <typename Initiation, typename... InitArgs>
  static auto initiate(Initiation&& initiation, aotpipe::UseTask token, InitArgs&&... args) {
    using Operation =
        aotpipe::detail::AsioOperation<std::decay_t<Initiation>, std::tuple<std::decay_t<InitArgs>...>, Args...>;
    return Operation(*token.scheduler, std::forward<Initiation>(initiation),
                     std::tuple<std::decay_t<InitArgs>...>(std::forward<InitArgs>(args)...));
  }
};
