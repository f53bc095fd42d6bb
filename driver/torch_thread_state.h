#pragma once
// libtorch's thread-local state follows coroutines across suspensions.
//
// Grad mode, inference mode, the dispatch-key include/exclude sets, functionalization flags
// and the current CUDA stream are thread-local in libtorch (at::ThreadLocalState). A stage that
// co_awaits may resume on another pool thread; with this propagator registered, every
// suspension captures at::ThreadLocalState and every resumption restores it, so the stage sees
// the settings it had (see pipeline/thread_context.h for the contract).
#include <aotpipe/pipeline/thread_context.h>

namespace aotpipe {

// Registers the propagator; it stays registered while the returned object lives.
ContextPropagatorRegistration propagate_torch_thread_state();

}  // namespace aotpipe
