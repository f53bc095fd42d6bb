#pragma once
// CompiledGraphs: what the compile stage hands the runtime (post_compile): the backend
// compilers' output for the traced graphs.
#include <aotpipe/graph/calling_convention.h>

#include <string>
#include <vector>

namespace aotpipe {

struct CompiledGraphs {
  CompiledGraph forward;   // training forward, or the inference graph
  CompiledGraph backward;  // training only
  // What the backends reported while compiling (backend/backend_notes.h), forward's
  // first: e.g. why a graph is not captured into a CUDA graph.
  std::vector<std::string> notes;
};

}  // namespace aotpipe
