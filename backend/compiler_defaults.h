#pragma once
// The rule for a configuration's empty backend compilers (AotConfig's): the forward defaults to
// the interpreter, the backward and the inference compiler to the forward's. One rule for a
// compile (resolve_defaults) and for a stored artifact made callable (post_compile), which needs
// no partitioner.
#include <aotpipe/graph/calling_convention.h>

namespace aotpipe {

struct DefaultedCompilers {
  Compiler forward;
  Compiler backward;
  Compiler inference;
};

DefaultedCompilers default_compilers(Compiler forward, Compiler backward, Compiler inference);

}  // namespace aotpipe
