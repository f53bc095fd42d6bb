#pragma once
// AnalyzedFunction: what the analysis stages hand each other (metadata -> dedupe ->
// synthetic_base -> joint). The metadata stage makes the first one; dedupe and synthetic_base
// each take one and return a rewritten one beside their runtime plan; the joint stage traces
// the last one.
#include <aotpipe/graph/calling_convention.h>
#include <aotpipe/stages/metadata/view_and_mutation_meta.h>

namespace aotpipe {

struct AnalyzedFunction {
  Function fn;      // the function as the next stage must trace it (inner calling convention)
  TensorList args;  // its example arguments, in that convention
  ViewAndMutationMeta meta;
  // Some input requires grad and the function is not "output and mutation safe"
  // (create_aot_state): the joint stage traces forward and backward, and the runtime goes
  // through autograd.
  bool needs_autograd = false;
};

}  // namespace aotpipe
