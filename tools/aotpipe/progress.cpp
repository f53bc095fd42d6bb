#include "aotpipe/progress.h"

#include <fmt/format.h>

#include <cstdio>
#include <string>
#include <unistd.h>

namespace aotpipe::cli {

bool stderr_is_terminal() { return ::isatty(STDERR_FILENO) != 0; }

ProgressDisplay::ProgressDisplay(bool interactive) : interactive_(interactive) {}

void ProgressDisplay::update(const BatchProgress& p) {
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  if (!interactive_) {
    fmt::print(stderr, "[{}/{}] {} {} ({:.1f} s)\n", p.finished, p.total, p.job, to_string(p.status), seconds);
    return;
  }
  constexpr std::size_t width = 30;
  const std::size_t filled = p.total ? p.finished * width / p.total : width;
  const std::string bar = std::string(filled, '#') + std::string(width - filled, '.');
  fmt::print(stderr, "\r\033[K[{}] {}/{} graphs  {} failed  {:.1f} s  {}", bar, p.finished, p.total,
             p.failed + p.cancelled + p.timed_out, seconds, p.job);
  std::fflush(stderr);
  drawn_ = true;
}

void ProgressDisplay::finish() {
  if (!drawn_) return;
  fmt::print(stderr, "\r\033[K");
  std::fflush(stderr);
  drawn_ = false;
}

}  // namespace aotpipe::cli
