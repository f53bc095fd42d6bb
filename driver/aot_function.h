#pragma once
// The compile driver: one compile (compile_async: the cache lookup, the pipeline, the cache
// store, post_compile) and aot_function, which compiles a flat TensorList -> TensorList function
// ahead of time, as PyTorch's aot_function does, and calls it like the original (outputs,
// gradients, input mutations and output aliasing as in eager). See docs/user-guide.md.
//
// The compile cache is the driver's, not the stages': every entry point takes it as its last
// argument (null: no cache), and AotConfig, which the stages read, does not hold it.
#include <aotpipe/pipeline/lazy.h>
#include <aotpipe/pipeline/pipeline.h>
#include <aotpipe/pipeline/task.h>
#include <aotpipe/cache/compile_cache.h>
#include <aotpipe/runtime/compiled_artifact.h>
#include <aotpipe/stages/compile_stages.h>
#include <aotpipe/stages/compile_state.h>

#include <memory>
#include <string>

namespace aotpipe {

class Scheduler;

struct CompileOutput {
  RuntimeFn runtime;                                 // the outer calling convention (the user's)
  std::shared_ptr<const CompiledArtifact> artifact;  // the compile as data
  CacheReport cache;                                 // what the compile cache did

  // Graphs, metadata and partition, for inspection. After a cache hit: rebuilt from the
  // artifact on first use (state_of, which decodes its graphs), with `fn` and `args` empty.
  const std::shared_ptr<const CompileState>& state() const { return state_.get(); }
  void set_state(Lazy<std::shared_ptr<const CompileState>> state) { state_ = std::move(state); }

 private:
  Lazy<std::shared_ptr<const CompileState>> state_;
};

// One compile of `fn` for `example_args` (never modified) through `pipeline`: looked up in
// `cache` first when there is one (keyed on `program` when given, the graph `fn` runs, else on
// a fake trace of `fn`), stored there after a miss. Either way the callable comes from
// post_compile(artifact).
Task<CompileOutput> compile_async(std::string name, Function fn, TensorList example_args, AotConfig config,
                                  const Pipeline<CompileState>& pipeline, const JobEnv& env,
                                  std::shared_ptr<const Graph> program = nullptr,
                                  std::shared_ptr<CompileCache> cache = nullptr);
CompileOutput compile(const std::string& name, Function fn, TensorList example_args, AotConfig config = {},
                      std::shared_ptr<const Graph> program = nullptr, std::shared_ptr<CompileCache> cache = nullptr);

// The scheduler aot_function compiles on (created on first use).
Scheduler& default_compile_scheduler();

class CompiledFunction {
 public:
  // `cache`: where each signature's compile is looked up first and stored after (null: none).
  CompiledFunction(Function fn, AotConfig config, std::string name = "aot_function",
                   std::shared_ptr<CompileCache> cache = nullptr);
  // First call with a new input signature compiles; later calls with it reuse the compile.
  TensorList operator()(const TensorList& args) const;
  std::size_t num_compiled() const;
  // The compile serving `args`' signature (compiling it if needed), for inspection.
  std::shared_ptr<const CompileState> compiled_state(const TensorList& args) const;

 private:
  struct Impl;
  std::shared_ptr<Impl> impl_;
};

CompiledFunction aot_function(Function fn, AotConfig config = {}, std::shared_ptr<CompileCache> cache = nullptr);

}  // namespace aotpipe
