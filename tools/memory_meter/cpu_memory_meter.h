#pragma once
// Peak CPU memory of a stretch of code, for the benchmarks: a CPU allocator that wraps libtorch's
// and counts the bytes of the tensors allocated while it is enabled, until they are freed.
//
// A shared library with a C interface, so that PyTorch eager in Python (ctypes, after `import
// torch`: the same libc10) and aotpipe in C++ are measured by the same code. Install it before
// anything else wraps the CPU allocator (the planned backend's arena hook wraps whatever is
// installed, and its arena blocks are then counted while its slots are not counted twice).
//
//   aotpipe_meter_install();          // once; false if a higher-priority allocator is installed
//   aotpipe_meter_start();            // counts from zero: live and peak bytes of new tensors
//   ... the step ...
//   aotpipe_meter_stop();             // new tensors are no longer counted (freed ones still are)
//   aotpipe_meter_peak_bytes();       // the most bytes live at once since start
#include <cstdint>

extern "C" {
bool aotpipe_meter_install();
void aotpipe_meter_start();
void aotpipe_meter_stop();
std::int64_t aotpipe_meter_live_bytes();
std::int64_t aotpipe_meter_peak_bytes();
}

namespace aotpipe {
// The most bytes `f()`'s new tensors hold at once (the meter installed).
template <class F>
std::int64_t peak_cpu_bytes(F&& f) {
  aotpipe_meter_start();
  try {
    f();
  } catch (...) {
    aotpipe_meter_stop();
    throw;
  }
  aotpipe_meter_stop();
  return aotpipe_meter_peak_bytes();
}
}  // namespace aotpipe
