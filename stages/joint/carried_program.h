#pragma once
// CarriedProgram: the joint stage's program, traced by the metadata stage's own trace.
//
// The metadata stage and the joint stage each run the function once on fake tensors (as
// PyTorch's collect_metadata and create_joint do), and for most functions the second run
// repeats the first: with no input mutated, no duplicated input and grad mode left alone,
// prepare_forward is the function itself and dedupe and synthetic_base change nothing, so the
// joint's forward records the same ops the analysis did. The metadata stage then carries its
// trace on into the backward (TraceOptions::plan_backward), or, for inference, keeps its graph;
// the joint stage takes that program instead of tracing again. A stage in between that rewrites
// the function (a new callable, other arguments, other metadata) leaves it unused.
#include <aotpipe/graph/calling_convention.h>
#include <aotpipe/stages/common/analyzed_function.h>
#include <aotpipe/stages/joint/traced_program.h>
#include <aotpipe/tracer/tracer.h>

#include <memory>
#include <string>

namespace aotpipe {

// A Function whose copies share one callable, so that a later stage can tell whether the
// function it holds is still the one a trace ran (std::function has no identity of its own).
struct SharedFunction {
  std::shared_ptr<const Function> fn;
  TensorList operator()(const TensorList& args) const { return (*fn)(args); }
};

struct CarriedProgram {
  // What it was traced from: AnalyzedFunction::fn holds a SharedFunction of `fn`.
  std::shared_ptr<const Function> fn;
  TensorList args;
  ViewAndMutationMeta meta;
  bool needs_autograd = false;
  std::string name;  // the compile's name (graphs NAME.joint / NAME.inference)
  bool allow_cpu_fallback = true;

  TracedProgram program;
  CpuFallbackCounts cpu_fallbacks;  // the whole trace's, as the joint stage's own trace would count

  // Whether the joint stage, asked for `function` under `name`, would trace this program.
  bool traced_from(const AnalyzedFunction& function, const std::string& name, bool allow_cpu_fallback) const;
};

}  // namespace aotpipe
