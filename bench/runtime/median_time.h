#pragma once
// Wall-time primitives of the runtime benchmarks (this machine's noise makes single runs useless).
#include <algorithm>
#include <array>
#include <chrono>
#include <cstddef>
#include <vector>

namespace aotpipe::bench {

// The median wall time of a callable over n runs, in milliseconds.
template <class F>
double median_ms(F&& f, int n) {
  using Clock = std::chrono::steady_clock;
  std::vector<double> ms;
  for (int i = 0; i < n; ++i) {
    const auto start = Clock::now();
    f();
    ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - start).count());
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

// Per-call milliseconds of several callables measured side by side: each sample times a batch of
// back-to-back calls (sized so a batch lasts at least `batch_ms`, which keeps timer resolution and
// one-off stalls out of sub-millisecond calls), the callables' batches alternate (so drift and
// machine noise hit all alike), and each result is the median over `samples` batches. One call of
// each first, untimed: first-call costs (op lookups, thread-local caches) are not what is measured.
template <std::size_t N, class... F>
std::array<double, N> interleaved_median_ms(int samples, double batch_ms, F&&... fs) {
  static_assert(sizeof...(F) == N);
  using Clock = std::chrono::steady_clock;
  auto elapsed_ms = [](Clock::time_point start) {
    return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
  };
  std::array<int, N> batch{};
  {
    std::size_t k = 0;
    ((
         fs(), batch[k++] =
                   [&] {
                     const auto start = Clock::now();
                     fs();
                     const double one = std::max(elapsed_ms(start), 1e-4);
                     return std::max(1, static_cast<int>(batch_ms / one));
                   }()),
     ...);
  }
  std::array<std::vector<double>, N> per_call;
  for (int s = 0; s < samples; ++s) {
    std::size_t k = 0;
    ((per_call[k].push_back([&] {
       const auto start = Clock::now();
       for (int i = 0; i < batch[k]; ++i) fs();
       return elapsed_ms(start) / batch[k];
     }()),
      ++k),
     ...);
  }
  std::array<double, N> medians{};
  for (std::size_t k = 0; k < N; ++k) {
    std::sort(per_call[k].begin(), per_call[k].end());
    medians[k] = per_call[k][per_call[k].size() / 2];
  }
  return medians;
}

}  // namespace aotpipe::bench
