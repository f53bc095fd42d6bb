#pragma once
// Built-in backend compilers.
#include <aotpipe/stages/compile_state.h>

namespace aotpipe::backends {

// Runs the graph with aotpipe's Interpreter (boxed ATen calls, values freed at last use).
Compiler interpreter();

}  // namespace aotpipe::backends
