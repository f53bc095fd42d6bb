#pragma once
// The median wall time of a callable over n runs, in milliseconds: the runtime benchmarks' one
// timing primitive (this machine's noise makes single runs useless).
#include <algorithm>
#include <chrono>
#include <vector>

namespace aotpipe::bench {

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

}  // namespace aotpipe::bench
