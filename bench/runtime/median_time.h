#pragma once
// Wall-time primitives of the runtime benchmarks (this machine's noise makes single runs useless).
#include <algorithm>
#include <array>
#include <chrono>
#include <cstddef>
#include <functional>
#include <vector>

namespace aotpipe::bench {

// Milliseconds that `calls` back-to-back calls of f take.
template <class F>
double elapsed_ms(F&& f, int calls = 1) {
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < calls; ++i) f();
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

inline double median_of(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

// The median wall time of a callable over n runs, in milliseconds.
template <class F>
double median_ms(F&& f, int n) {
  std::vector<double> ms;
  for (int i = 0; i < n; ++i) ms.push_back(elapsed_ms(f));
  return median_of(std::move(ms));
}

// Per-call milliseconds of several callables measured side by side: each sample times a batch of
// back-to-back calls (sized so a batch lasts at least `batch_ms`, which keeps timer resolution and
// one-off stalls out of sub-millisecond calls), the callables' batches alternate (so drift and
// machine noise hit all alike), and each result is the median over `samples` batches. One call of
// each first, untimed: first-call costs (op lookups, thread-local caches) are not what is measured.
template <class... F>
std::array<double, sizeof...(F)> interleaved_median_ms(int samples, double batch_ms, F&... fs) {
  constexpr std::size_t n = sizeof...(F);
  const std::array<std::function<void()>, n> calls{std::function<void()>(std::ref(fs))...};
  std::array<int, n> batch{};
  for (std::size_t k = 0; k < n; ++k) {
    calls[k]();
    batch[k] = std::max(1, static_cast<int>(batch_ms / std::max(elapsed_ms(calls[k]), 1e-4)));
  }
  std::array<std::vector<double>, n> per_call;
  for (int s = 0; s < samples; ++s)
    for (std::size_t k = 0; k < n; ++k) per_call[k].push_back(elapsed_ms(calls[k], batch[k]) / batch[k]);
  std::array<double, n> medians{};
  for (std::size_t k = 0; k < n; ++k) medians[k] = median_of(std::move(per_call[k]));
  return medians;
}

}  // namespace aotpipe::bench
