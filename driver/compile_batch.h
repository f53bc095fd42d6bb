#pragma once
// compile_batch: many compiles at once on the pool, each isolated (one job's error is its own
// result and never stops the others), with per-stage timings for reports.
//
//   std::vector<CompileJob> jobs = {{"mlp", mlp, mlp_args, {}}, {"attn", attn, attn_args, {}}};
//   for (const CompileResult& r : compile_batch(std::move(jobs), {.max_concurrency = 2}))
//     if (!r.ok()) std::cerr << r.message << "\n";   // names the job and the stage
//
// Underneath the `aotpipe compile` command. Built on run_batch (pipeline/batch.h), whose
// BatchOptions (concurrency, stop token, per-job timeout, hooks, progress) apply unchanged.
#include <aotpipe/pipeline/batch.h>
#include <aotpipe/driver/aot_function.h>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

namespace aotpipe {

struct CompileJob {
  std::string name;
  Function fn;
  TensorList example_args;  // never modified
  AotConfig config;
  // The graph `fn` runs, when it has one (a graph file, an exported program): the compile
  // cache keys on it. Null: the cache keys on a fake trace of `fn`.
  std::shared_ptr<const Graph> program;
  // Where the compile is looked up first and stored after (cache/compile_cache.h); null: none.
  std::shared_ptr<CompileCache> cache;
};

struct StageTime {
  std::string stage;
  std::chrono::nanoseconds elapsed{0};
  bool failed = false;
};

struct CompileResult {
  std::string name;
  JobStatus status = JobStatus::Cancelled;
  std::optional<CompileOutput> output;  // Succeeded only: call output->runtime, inspect output->state()
  std::string failed_stage;             // the stage that raised, when one did
  std::string message;                  // all but Succeeded: names the job and the stage
  std::exception_ptr error;             // all but Succeeded
  std::vector<StageTime> stages;        // every stage that ran, in order (nested stages included)
  std::chrono::nanoseconds elapsed{0};  // the whole job

  bool ok() const noexcept { return status == JobStatus::Succeeded; }
};

// On default_compile_scheduler() through default_compile_pipeline().
std::vector<CompileResult> compile_batch(std::vector<CompileJob> jobs, BatchOptions options = {});
// On `scheduler` through `pipeline` (which must outlive the call).
std::vector<CompileResult> compile_batch(std::vector<CompileJob> jobs, const Pipeline<CompileState>& pipeline,
                                         Scheduler& scheduler, BatchOptions options = {});

}  // namespace aotpipe
