#pragma once
// Built-in backend compilers, and naming a compiler so that the compile cache can key on it.
#include <aotpipe/graph/calling_convention.h>

#include <string>

namespace aotpipe {

// A compiler the compile cache may key on: `identity` names it, its version and its options
// (pipeline/identified.h). backends::interpreter() is one; a plain lambda is not, and a compile
// using one bypasses the cache.
Compiler named_compiler(std::string identity, Compiler compiler);

namespace backends {

// Runs the graph with aotpipe's Interpreter (boxed ATen calls, values freed at last use, pointwise
// ops re-inplaced into intermediates nothing else holds; in an inference graph, the calls that
// depend on no input computed once: InterpreterOptions::fold_constants).
Compiler interpreter();

// The interpreter on the graph's memory plan (InterpreterOptions::plan_memory, docs/memory.md):
// the calls that have an out= kernel write their results into one arena per run, at offsets
// planned ahead, instead of allocating each; the rest as interpreter(). Registered as "planned".
Compiler planned_interpreter();

}  // namespace backends
}  // namespace aotpipe
