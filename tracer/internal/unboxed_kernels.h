#pragma once
// The tracer's unboxed kernels (unboxed_kernels.cpp): the frequent functional ops recorded without boxing
// their arguments. What a trace records must not depend on which path a call took; tests check
// that with these.
#include <cstddef>

namespace aotpipe::detail {

// Within this scope, on this thread, every traced call takes the boxed fallback.
class UnboxedKernelsOff {
 public:
  UnboxedKernelsOff();
  ~UnboxedKernelsOff();
  UnboxedKernelsOff(const UnboxedKernelsOff&) = delete;
  UnboxedKernelsOff& operator=(const UnboxedKernelsOff&) = delete;

 private:
  bool previous_;
};

// How many calls this thread's traces have recorded through an unboxed kernel so far.
std::size_t unboxed_calls();

}  // namespace aotpipe::detail
