// ThreadSanitizer canary for the torch-linked TSan build (build-tsan-torch): two threads write
// the same element of a libtorch tensor with no synchronization. Registered only under
// AOTPIPE_SANITIZE_THREAD, run with the same options and suppressions as the real tests, and
// passes only if TSan reports the race in this file (PASS_REGULAR_EXPRESSION): so the tsan-torch
// run cannot pass silently because instrumentation, the runtime or the reporting is off, or
// because the suppressions hide races in our own code on libtorch-allocated memory.
#include <ATen/ATen.h>

#include <cstdio>
#include <thread>

namespace {

// Instrumented code (ours) writing memory that libtorch's allocator (libc10) handed out.
void racy_unsynchronized_increment(float* element) { *element += 1.0f; }

}  // namespace

int main() {
  at::Tensor shared = at::zeros({4});
  float* element = shared.data_ptr<float>();
  std::thread first(racy_unsynchronized_increment, element);
  std::thread second(racy_unsynchronized_increment, element);
  first.join();
  second.join();
  // Reached only if TSan did not stop the program (halt_on_error=1): the test then fails.
  std::printf("no race reported: ThreadSanitizer is not active (value %.0f)\n", shared[0].item<double>());
  return 0;
}
