#include <aotpipe/driver/torch_thread_state.h>

#include <ATen/ThreadLocalState.h>

namespace aotpipe {

ContextPropagatorRegistration propagate_torch_thread_state() {
  return register_context_propagator({
      .name = "at::ThreadLocalState",
      .capture = [] { return std::any(at::ThreadLocalState()); },
      .restore =
          [](std::any& saved) {
            at::ThreadLocalState::setThreadLocalState(std::any_cast<at::ThreadLocalState&>(saved));
          },
  });
}

}  // namespace aotpipe
