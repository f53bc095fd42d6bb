// Overheads of the pipeline machinery against plain oneTBB doing the same (empty) work.
//
//   TaskAwait            one synchronously completing co_await (frame allocation + 2 transfers)
//   ScheduleHop          N coroutines, each hopping onto the pool once, joined with when_all
//   TbbTaskGroup         N empty tbb::task_group tasks in an arena of the same thread count
//   StageHop             a pipeline of K stages, each hopping onto the pool (what a stage costs)
//   TbbTaskChain         K empty tasks, each started by the previous one (the same dependency)
//   BatchThroughput      run_batch of 256 jobs x 6 stages doing ~2 us of work each
//
// The thread count is the benchmark argument (1 and 2 on the reference machine).
#include <aotpipe/pipeline/batch.h>
#include <aotpipe/pipeline/pipeline.h>
#include <aotpipe/pipeline/pipeline_job.h>
#include <aotpipe/pipeline/scheduler.h>
#include <aotpipe/pipeline/sync_wait.h>
#include <aotpipe/pipeline/when_all.h>

#include <benchmark/benchmark.h>
#include <oneapi/tbb/global_control.h>
#include <oneapi/tbb/task_arena.h>
#include <oneapi/tbb/task_group.h>

#include <string>
#include <vector>

namespace {

using aotpipe::JobEnv;
using aotpipe::Scheduler;
using aotpipe::Task;

constexpr int kTasksPerIteration = 1024;
constexpr int kStagesPerPipeline = 64;

Task<int> ready_value() { co_return 1; }

Task<long> await_ready_values(int count) {
  long total = 0;
  for (int i = 0; i < count; ++i) total += co_await ready_value();
  co_return total;
}

void TaskAwait(benchmark::State& state) {
  for (auto _ : state) benchmark::DoNotOptimize(aotpipe::sync_wait(await_ready_values(kTasksPerIteration)));
  state.SetItemsProcessed(state.iterations() * kTasksPerIteration);
}
BENCHMARK(TaskAwait);

Task<void> hop_onto(Scheduler& scheduler) { co_await scheduler.schedule(); }

void ScheduleHop(benchmark::State& state) {
  Scheduler scheduler(static_cast<std::size_t>(state.range(0)));
  for (auto _ : state) {
    std::vector<Task<void>> tasks;
    tasks.reserve(kTasksPerIteration);
    for (int i = 0; i < kTasksPerIteration; ++i) tasks.push_back(hop_onto(scheduler));
    aotpipe::sync_wait(aotpipe::when_all(std::move(tasks)));
  }
  state.SetItemsProcessed(state.iterations() * kTasksPerIteration);
}
BENCHMARK(ScheduleHop)->Arg(1)->Arg(2)->UseRealTime();

// A plain oneTBB arena of `threads` threads for the baselines: one slot for the calling thread
// (which joins through execute) and threads - 1 workers, as many threads as Scheduler(threads).
struct BaselineArena {
  explicit BaselineArena(benchmark::State& state)
      : cap(tbb::global_control::max_allowed_parallelism, static_cast<std::size_t>(state.range(0)) + 1),
        arena(static_cast<int>(state.range(0))) {}
  tbb::global_control cap;
  tbb::task_arena arena;
};

void TbbTaskGroup(benchmark::State& state) {
  BaselineArena baseline(state);
  for (auto _ : state) {
    baseline.arena.execute([] {
      tbb::task_group group;
      for (int i = 0; i < kTasksPerIteration; ++i) group.run([] {});
      group.wait();
    });
  }
  state.SetItemsProcessed(state.iterations() * kTasksPerIteration);
}
BENCHMARK(TbbTaskGroup)->Arg(1)->Arg(2)->UseRealTime();

struct Empty {};

struct HopStage {
  std::string_view name() const noexcept { return "hop"; }
  Task<void> run(Empty&, const JobEnv& env) const { co_await env.scheduler.schedule(); }
};

void StageHop(benchmark::State& state) {
  Scheduler scheduler(static_cast<std::size_t>(state.range(0)));
  aotpipe::Pipeline<Empty> pipeline;
  for (int i = 0; i < kStagesPerPipeline; ++i) pipeline.add(HopStage{});
  aotpipe::StageHooks timing_hooks;
  timing_hooks.add(std::make_shared<aotpipe::StageTimings>());
  const JobEnv env{.job_name = "bench", .scheduler = scheduler, .hooks = state.range(1) ? &timing_hooks : nullptr};
  for (auto _ : state) {
    Empty context;
    aotpipe::sync_wait(pipeline.run(context, env));
  }
  state.SetItemsProcessed(state.iterations() * kStagesPerPipeline);
  state.SetLabel(state.range(1) ? "with StageTimings hook" : "no hooks");
}
BENCHMARK(StageHop)->ArgsProduct({{1, 2}, {0, 1}})->UseRealTime();

void run_chain(tbb::task_group& group, int remaining) {
  if (remaining > 0) group.run([&group, remaining] { run_chain(group, remaining - 1); });
}

void TbbTaskChain(benchmark::State& state) {
  BaselineArena baseline(state);
  for (auto _ : state) {
    baseline.arena.execute([] {
      tbb::task_group group;
      run_chain(group, kStagesPerPipeline);
      group.wait();
    });
  }
  state.SetItemsProcessed(state.iterations() * kStagesPerPipeline);
}
BENCHMARK(TbbTaskChain)->Arg(1)->Arg(2)->UseRealTime();

// About 2 us of arithmetic the optimizer cannot remove.
struct WorkStage {
  std::string_view name() const noexcept { return "work"; }
  Task<void> run(Empty&, const JobEnv&) const {
    unsigned value = 1;
    for (int i = 0; i < 4000; ++i) value = value * 1664525u + 1013904223u;
    benchmark::DoNotOptimize(value);
    co_return;
  }
};

void BatchThroughput(benchmark::State& state) {
  constexpr int kJobs = 256;
  Scheduler scheduler(static_cast<std::size_t>(state.range(0)));
  aotpipe::Pipeline<Empty> pipeline;
  for (int i = 0; i < 6; ++i) pipeline.add(WorkStage{});
  auto shared = std::make_shared<const aotpipe::Pipeline<Empty>>(std::move(pipeline));
  for (auto _ : state) {
    std::vector<aotpipe::BatchJob<Empty>> jobs;
    jobs.reserve(kJobs);
    for (int i = 0; i < kJobs; ++i) jobs.push_back(aotpipe::make_pipeline_job("job", shared, Empty{}));
    benchmark::DoNotOptimize(aotpipe::run_batch(scheduler, std::move(jobs)));
  }
  state.SetItemsProcessed(state.iterations() * kJobs);
}
BENCHMARK(BatchThroughput)->Arg(1)->Arg(2)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
