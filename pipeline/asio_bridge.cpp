#include <aotpipe/pipeline/asio_bridge.h>

#include <aotpipe/pipeline/errors.h>

namespace aotpipe {

AsioIoThread::AsioIoThread()
    : keep_running_(boost::asio::make_work_guard(context_)), thread_([this] { context_.run(); }) {}

AsioIoThread::~AsioIoThread() {
  keep_running_.reset();
  context_.stop();  // pending waits are abandoned; their owners are gone by contract
  thread_.join();
}

std::shared_ptr<StrandTimer> StrandTimer::create(boost::asio::io_context& context,
                                                 std::chrono::steady_clock::duration delay) {
  return std::shared_ptr<StrandTimer>(new StrandTimer(context, delay));
}

StrandTimer::StrandTimer(boost::asio::io_context& context, std::chrono::steady_clock::duration delay)
    : strand_(boost::asio::make_strand(context)), timer_(strand_, delay) {}

void StrandTimer::cancel() {
  boost::asio::post(strand_, [self = shared_from_this()] {
    self->cancelled_ = true;
    self->timer_.cancel();
  });
}

Task<void> sleep_for(Scheduler& scheduler, std::chrono::steady_clock::duration delay, std::stop_token stop) {
  if (stop.stop_requested()) throw OperationCancelled("sleep cancelled before it started");
  auto timer = StrandTimer::create(scheduler.io_context(), delay);
  std::stop_callback cancel_on_stop(stop, [timer] { timer->cancel(); });
  UseTask resume_here = use_task(scheduler);
  // A named local, not a temporary of the co_await expression: GCC 12 destroys such
  // temporaries twice when the awaited operation throws (here: a cancelled wait).
  auto start_wait = [timer](auto handler) { timer->async_wait(std::move(handler)); };
  try {
    co_await boost::asio::async_initiate<UseTask, void(boost::system::error_code)>(start_wait, resume_here);
  } catch (const boost::system::system_error& error) {
    if (error.code() != boost::asio::error::operation_aborted) throw;
  }
  // Checked after the wait rather than from the error code: a stop that comes after the timer
  // fired but before the cancel landed still counts as cancelled.
  if (stop.stop_requested()) throw OperationCancelled("sleep cancelled");
}

}  // namespace aotpipe
