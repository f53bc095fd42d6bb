#pragma once
// aot_function: compile a flat TensorList -> TensorList function ahead of time, as PyTorch's
// aot_function does, and call it like the original (outputs, gradients, input mutations and
// output aliasing as in eager). See docs/user-guide.md.
#include <aotpipe/pipeline/lazy.h>
#include <aotpipe/pipeline/pipeline.h>
#include <aotpipe/pipeline/task.h>
#include <aotpipe/runtime/compile_cache.h>
#include <aotpipe/runtime/compiled_artifact.h>
#include <aotpipe/stages/compile_state.h>

#include <memory>
#include <string>

namespace aotpipe {

class Scheduler;

// The stages of one compile: every stage of compile_stages() (compile_pipeline.h), in order.
Pipeline<CompileState> default_compile_pipeline();

struct CompileOutput {
  RuntimeFn runtime;                                 // the outer calling convention (the user's)
  std::shared_ptr<const CompiledArtifact> artifact;  // the compile as data
  CacheReport cache;                                 // what config.cache did

  // Graphs, metadata and partition, for inspection. After a cache hit: rebuilt from the
  // artifact on first use (state_of, which decodes its graphs), with `fn` and `args` empty.
  const std::shared_ptr<const CompileState>& state() const { return state_.get(); }
  void set_state(Lazy<std::shared_ptr<const CompileState>> state) { state_ = std::move(state); }

 private:
  Lazy<std::shared_ptr<const CompileState>> state_;
};

// One compile of `fn` for `example_args` (never modified) through `pipeline`: looked up in
// config.cache first when there is one (keyed on `program` when given, the graph `fn` runs,
// else on a fake trace of `fn`), stored there after a miss. Either way the callable comes from
// post_compile(artifact).
Task<CompileOutput> compile_async(std::string name, Function fn, TensorList example_args, AotConfig config,
                                  const Pipeline<CompileState>& pipeline, const JobEnv& env,
                                  std::shared_ptr<const Graph> program = nullptr);
CompileOutput compile(std::string name, Function fn, TensorList example_args, AotConfig config = {},
                      std::shared_ptr<const Graph> program = nullptr);

// The scheduler aot_function compiles on (created on first use).
Scheduler& default_compile_scheduler();

// The cache key of a call: sizes, strides, offsets, dtypes, devices, requires_grad, leafness,
// the duplicate and aliasing pattern of the arguments, and grad mode.
std::string input_signature(const TensorList& args);

class CompiledFunction {
 public:
  CompiledFunction(Function fn, AotConfig config, std::string name = "aot_function");
  // First call with a new input signature compiles; later calls with it reuse the compile.
  TensorList operator()(const TensorList& args) const;
  std::size_t num_compiled() const;
  // The compile serving `args`' signature (compiling it if needed), for inspection.
  std::shared_ptr<const CompileState> compiled_state(const TensorList& args) const;

 private:
  struct Impl;
  std::shared_ptr<Impl> impl_;
};

CompiledFunction aot_function(Function fn, AotConfig config = {});

}  // namespace aotpipe
