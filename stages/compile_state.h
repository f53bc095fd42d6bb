#pragma once
// CompileState: everything one compile carries from stage to stage (the pipeline's context).
//
// Every analysis stage has two halves, as PyTorch's CompilerWrapper does:
//   pre-compile   transforms the AnalyzedFunction for the stages after it (a stage's run());
//   post-compile  a RuntimeWrapper pushed onto `wrappers`: a function from the compiled callable
//                 of the inner calling convention to one of the outer convention.
// The built-in stages' post-compile halves are plain data (RuntimeWrapper::plan), so a cached
// compile rebuilds its runtime from the plans alone (runtime/post_compile.h).
#include <aotpipe/graph/calling_convention.h>
#include <aotpipe/graph/graph.h>
#include <aotpipe/pipeline/analysis_manager.h>
#include <aotpipe/pipeline/identified.h>
#include <aotpipe/stages/common/runtime_plans.h>
#include <aotpipe/stages/common/analyzed_function.h>
#include <aotpipe/backend/backends.h>
#include <aotpipe/backend/compiled_graphs.h>
#include <aotpipe/stages/joint/traced_program.h>
#include <aotpipe/stages/partition/partitioner.h>
#include <aotpipe/tracer/tracer.h>

#include <cstddef>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace aotpipe {

struct AotConfig {
  Compiler fw_compiler;         // empty: backends::interpreter()
  Compiler bw_compiler;         // empty: same as fw_compiler
  Compiler inference_compiler;  // empty: same as fw_compiler
  // Empty: the forward compiler's choice (backend/backend_traits.h): min-cut rematerialization
  // (the interpreter's; without the fusion heuristic ban_recompute_used_far_apart for a backend
  // that fuses nothing), or the default partitioner for a backend that recomputation does not
  // pay for (cuda_graphs).
  Partitioner partition_fn;
  std::size_t num_params_buffers = 0;
  bool keep_inference_input_mutations = false;
  // Fake traces may run an op with no Meta kernel on zero-filled CPU tensors (counted in
  // CompileState::cpu_fallbacks). false: such an op fails the compile, naming it.
  bool allow_cpu_fallback = true;
  // false: the forward and backward compilers run one after the other on the compiling thread,
  // as PyTorch's do (no thread switch: the built-in interpreter compiles in microseconds, and the
  // two hops to the pool and back were up to 40% of a small compile, docs/benchmarks.md). true:
  // as two tasks on the job's scheduler, for a backend that takes long when the pool has idle
  // threads. Not part of the cache key (the result is the same).
  bool compile_fw_bw_concurrently = false;
  // Ops the joint and inference traces replace by a decomposition (PyTorch's
  // aot_function(decompositions=...)): qualified overload name ("aten::gelu") -> what runs instead,
  // below autograd (tracer/tracer.h, Decomposition; the backward of an op autograd records is
  // decomposed only if it is in the table too). For a backend that fuses primitives; the built-in
  // kernel-running backends take none and keep ATen's fused kernels, which the trace records
  // wherever autograd has a formula for them (hardswish, batch norm, layer norm, attention).
  // The metadata analysis runs without them, as in PyTorch.
  std::map<std::string, Decomposition> decompositions;
  // Names the table for the compile cache (its version, its ops' meaning); a non-empty table
  // without one makes the compile bypass the cache, as a plain-callable compiler does.
  std::string decompositions_identity;
  // The compile cache is not configured here: the driver takes it (driver/aot_function.h).
};

// The config with its empty members filled in (the interpreter, the forward compiler's partitioner).
AotConfig resolve_defaults(AotConfig config);

// The callable at one layer of the runtime.
using RuntimeFn = std::function<TensorList(TensorList)>;

struct RuntimeWrapper {
  std::string stage;                         // which stage's post-compile half this is
  std::function<RuntimeFn(RuntimeFn)> wrap;  // inner convention -> outer convention
  // The built-in stages' halves as data; a wrapper without one (a user stage's closure) makes
  // the compile uncacheable.
  std::optional<RuntimePlan> plan;
};

// The wrapper of a built-in stage's plan: what the stage pushes and what post_compile rebuilds.
RuntimeWrapper runtime_wrapper(RuntimePlan plan);

// The pipeline's context: one slot per stage product, each the typed result of one stage
// (see each stage's header for the function that makes it). A stage reads the slots it needs
// and fills its own, so a custom pipeline can stop, reorder or replace stages.
struct CompileState {
  std::string name = "compile";
  AotConfig config;

  // Filled by the caller, then rewritten by the analysis stages (metadata, dedupe,
  // synthetic_base): the function as the next stage sees it.
  AnalyzedFunction function;
  // The analysis stages' post-compile halves, outermost first (the order the stages ran).
  std::vector<RuntimeWrapper> wrappers;
  // joint: the joint graph (training) or the inference graph.
  TracedProgram traced;
  // partition: the joint split into forward and backward (training only).
  std::shared_ptr<const PartitionResult> partition;
  // compile: the backend compilers' output.
  CompiledGraphs compiled;

  // The ops the stages' fake traces ran on the CPU fallback, with call counts (all traces).
  CpuFallbackCounts cpu_fallbacks;

  // Results a stage computed that a later one may reuse (JointProgramAnalysis: the metadata
  // stage's trace, carried on into the joint), dropped by the pipeline after each stage that
  // does not report them preserved (pipeline/analysis_manager.h).
  AnalysisManager<CompileState> analyses;
};

// Composes the post-compile halves around `inner` (innermost wrapper applied first).
RuntimeFn apply_runtime_wrappers(const std::vector<RuntimeWrapper>& wrappers, RuntimeFn inner);

}  // namespace aotpipe
