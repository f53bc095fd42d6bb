#pragma once
// Device guards that make no driver call while a fake trace runs on this thread.
//
// A fake trace of a CUDA program hands autograd tensors that report cuda:N, so the autograd
// engine asks that device's DeviceGuardImpl for streams, events and the current device
// (InputMetadata records a stream per input; the engine guards streams around each backward
// node). On a machine without a GPU the CUDA implementation fails ("no CUDA GPUs are
// available"), and on one with a GPU it would create a context: neither belongs in a compile.
// While a FakeDeviceScope is open on a thread, the guard for each device type named through
// `fake_device_guard_for` answers from thread-local state (default streams, no-op events);
// everywhere else it forwards to libtorch's own implementation, so real CUDA work on other
// threads, or on this thread outside the scope, is unaffected. This is what Python's
// FakeTensorMode gets from running autograd over tensors that report a device they do not use.
#include <c10/core/DeviceType.h>

namespace aotpipe::detail {

// Opens fake-device mode on this thread (nestable).
class FakeDeviceScope {
 public:
  FakeDeviceScope();
  ~FakeDeviceScope();
  FakeDeviceScope(const FakeDeviceScope&) = delete;
  FakeDeviceScope& operator=(const FakeDeviceScope&) = delete;

  static bool active();
};

// Puts the forwarding guard in front of libtorch's for `type` (idempotent, thread-safe; a
// guard registered later, e.g. by a library loaded afterwards, is wrapped again). CPU and Meta
// need none.
void install_fake_device_guard(c10::DeviceType type);

}  // namespace aotpipe::detail
