#pragma once
// CompiledGraphs: what the compile stage hands the runtime (post_compile): the backend
// compilers' output for the traced graphs.
#include <aotpipe/graph/calling_convention.h>

namespace aotpipe {

struct CompiledGraphs {
  CompiledGraph forward;   // training forward, or the inference graph
  CompiledGraph backward;  // training only
};

}  // namespace aotpipe
