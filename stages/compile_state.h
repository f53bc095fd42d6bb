#pragma once
// CompileState: everything one compile carries from stage to stage (the pipeline's context).
//
// Every analysis stage has two halves, as PyTorch's CompilerWrapper does:
//   pre-compile   transforms (fn, args, meta) for the stages after it (a stage's run());
//   post-compile  a RuntimeWrapper pushed onto `wrappers`: a function from the compiled callable
//                 of the inner calling convention to one of the outer convention.
// The built-in stages' post-compile halves are plain data (RuntimeWrapper::plan), so a cached
// compile rebuilds its runtime from the plans alone (runtime/post_compile.h).
#include <aotpipe/graph/graph.h>
#include <aotpipe/pipeline/identified.h>
#include <aotpipe/stages/common/runtime_plans.h>
#include <aotpipe/stages/metadata/collect_metadata.h>
#include <aotpipe/stages/partition/partitioner.h>

#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace aotpipe {

// What a backend compiler returns: boxed, arguments by value so it may free them early.
using CompiledGraph = std::function<TensorList(TensorList)>;
// A backend compiler: gets a functional ATen graph and the metadata of its example inputs.
using Compiler = std::function<CompiledGraph(const Graph&, const std::vector<TensorMeta>&)>;

// A compiler the compile cache may key on: `identity` names it, its version and its options
// (pipeline/identified.h). backends::interpreter() is one; a plain lambda is not, and a compile
// using one bypasses the cache.
Compiler named_compiler(std::string identity, Compiler compiler);

class CompileCache;  // runtime/compile_cache.h

struct AotConfig {
  Compiler fw_compiler;         // empty: backends::interpreter()
  Compiler bw_compiler;         // empty: same as fw_compiler
  Compiler inference_compiler;  // empty: same as fw_compiler
  Partitioner partition_fn;     // empty: partitioners::min_cut_rematerialization_partition()
  std::size_t num_params_buffers = 0;
  bool keep_inference_input_mutations = false;
  // Fake traces may run an op with no Meta kernel on zero-filled CPU tensors (counted in
  // CompileState::cpu_fallbacks). false: such an op fails the compile, naming it.
  bool allow_cpu_fallback = true;
  // Where compiles are looked up and stored (runtime/compile_cache.h); null: no cache. Not part
  // of the cache key.
  std::shared_ptr<CompileCache> cache;
};

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

struct CompileState {
  std::string name = "compile";
  AotConfig config;

  // The flat function, its example arguments and its metadata, as the next stage sees them.
  Function fn;
  TensorList args;
  ViewAndMutationMeta meta;
  // Some input requires grad and grad mode is on, and the function is not "output and mutation
  // safe" (create_aot_state): trace a joint graph and run through autograd.
  bool needs_autograd = false;

  // The ops the stages' fake traces ran on the CPU fallback, with call counts (all traces).
  CpuFallbackCounts cpu_fallbacks;

  // Post-compile halves, outermost first (the order the stages ran).
  std::vector<RuntimeWrapper> wrappers;

  // Products of the later stages.
  std::optional<JointGraph> joint;           // training
  std::vector<std::size_t> undefined_grads;  // joint gradients autograd left undefined (graph: zeros)
  std::vector<std::size_t> grad_inputs;      // the inputs the joint's gradients are for, in order
  std::optional<Graph> inference_graph;      // inference
  std::optional<PartitionResult> partition;
  CompiledGraph compiled_forward;  // training forward, or the inference graph
  CompiledGraph compiled_backward;
};

// Composes the post-compile halves around `inner` (innermost wrapper applied first).
RuntimeFn apply_runtime_wrappers(const std::vector<RuntimeWrapper>& wrappers, RuntimeFn inner);

}  // namespace aotpipe
