// aotpipe compile INPUT... [-j N] [--pipeline SPEC] [--partitioner auto|min_cut|default] [--out DIR]
//                          [--trace FILE] [--check] [--no-svg] [--seed N] [--device D]
//                          [--no-cpu-fallback] [--cache-dir DIR | --no-cache] [--remote-cache URL]
//
// Every graph file (a directory stands for its *.aotg and *.pt2 files, recursively) is read as a
// user program: its forward function, with example inputs made from the inputs' TensorMeta. A
// torch.export archive (.pt2) is imported (export/exported_program.h) and its flat function
// compiled: lifted parameters, buffers and constants, then the user inputs. All of
// them are compiled concurrently with compile_batch (metadata, dedupe, synthetic base, joint,
// partition, compile; tracing on fake tensors). A file that cannot be read, parsed, verified or
// compiled is reported with its stage and message, and the rest of the batch completes. Then a
// summary table (ops, time per stage, CPU-fallback calls, saved bytes under default vs min-cut);
// the exit status is 1 when anything failed. Compiles go through the compile cache
// (cache/compile_cache.h) unless --no-cache: the table says hit or miss per graph.
#include "aotpipe/batch_report.h"
#include "aotpipe/commands.h"
#include "aotpipe/compile_jobs.h"
#include "aotpipe/compile_report.h"
#include "aotpipe/cuda_plugin.h"
#include "aotpipe/exported_programs.h"
#include "aotpipe/file_records.h"
#include "aotpipe/graph_files.h"
#include "aotpipe/load_graph.h"
#include "aotpipe/mpi_batch.h"
#include "aotpipe/packages.h"
#include "aotpipe/progress.h"
#include "aotpipe/random_inputs.h"
#include "aotpipe/shards.h"
#include "aotpipe/work_chunks.h"

#include <aotpipe/graph/device_retarget.h>
#include <aotpipe/pipeline/bounded_for_each.h>
#include <aotpipe/pipeline/chrome_trace.h>
#include <aotpipe/pipeline/scheduler.h>
#include <aotpipe/pipeline/sync_wait.h>
#include <aotpipe/driver/compile_batch.h>
#include <aotpipe/stages/compile_stages.h>
#include <aotpipe/runtime/eager_equivalence.h>
#include <aotpipe/runtime/graph_function.h>
#include <aotpipe/runtime/post_compile.h>

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Context.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <exception>
#include <functional>
#include <iterator>
#include <mutex>
#include <chrono>
#include <numeric>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <unistd.h>

namespace aotpipe::cli {
namespace {

struct CompileOptions {
  std::vector<std::string> inputs;
  std::size_t jobs = 0;  // 0: the machine's cores
  std::string pipeline = default_compile_pipeline_text();
  std::string partitioner = "auto";
  std::string backend = "interpreter";
  std::string out_dir;
  std::string trace_file;
  bool check = false;
  bool no_svg = false;
  uint64_t seed = 0;
  std::string device;  // empty: as the graph files say
  bool no_cpu_fallback = false;
  std::string package;             // write the one .pt2 input's compiles into this package
  std::vector<std::string> sizes;  // --package: the user input sizes to compile for
  std::string shard;               // "K/N": compile only that shard of the batch
  std::string manifest;            // where the shard's manifest goes (default: <out>/shards/shard-K-of-N.json)
  std::string cache_dir;           // empty: CompileCache::default_directory()
  bool no_cache = false;
  std::string remote_cache;  // redis://HOST:PORT: the cache's shared level
};

// --check's judge: float32's own error, measured against a float64 run of the eager program.
constexpr EquivalenceTolerance kCheckTolerance{.fp64_reference = true};

// Runs the compiled function against the graph run eagerly on fresh random inputs (a .pt2: on
// copies of its state, tied tensors kept tied, and its sample inputs).
std::vector<std::string> check_against_eager(const PreparedGraph& prepared, const CompileOutput& compiled,
                                             uint64_t seed) {
  if (prepared.program) {
    const ExportedProgram& program = *prepared.program;
    return compare_with_eager(
        program.flat_function(), compiled.runtime, [&program, seed] { return check_inputs(program, seed + 1); },
        kCheckTolerance);
  }
  const Graph& graph = *prepared.graph;
  auto make_inputs = [&graph, seed] {
    auto gen = at::make_generator<at::CPUGeneratorImpl>(seed + 1);
    return example_args(graph, gen);
  };
  return compare_with_eager(graph_function(prepared.graph), compiled.runtime, make_inputs, kCheckTolerance,
                            graph_function_in_float64(graph));
}

std::string host_name() {
  char name[256] = {};
  return ::gethostname(name, sizeof(name) - 1) == 0 ? std::string(name) : std::string("?");
}

// What every chunk of one run shares.
struct BatchContext {
  const CompileOptions& options;
  const JobSettings& settings;
  const std::vector<GraphFile>& files;  // the whole batch
  // Its graph names as each file declares them (graph_name_hint), made unique across the batch in
  // batch order: the same on every rank and shard, so output folders never collide. A file that
  // declares a name claims it even when it then fails to load.
  const std::vector<std::string>& names;
  const Pipeline<CompileState>& pipeline;
  Scheduler& scheduler;
  std::size_t threads;
  std::set<std::string> top_level_stages;
  std::shared_ptr<ChromeTraceRecorder> trace;
  // The cache's file records (file_records.h); null without a cache, or with --check (which
  // loads every graph to run it eagerly).
  const FileRecords* records;
  // One graph finished (or failed before its compile): for the progress bar. Thread-safe.
  std::function<void(std::string_view name, bool ok)> report;
};

using IndexedRow = std::pair<std::size_t, GraphRow>;  // a row and its file's index in the batch

// The row of one compiled graph: its times, summary, outputs (--out) and eager check (--check);
// then its file record (`record_digest`, when records are on).
void fill_row(const BatchContext& ctx, const PreparedGraph& prepared, CompileResult& result, GraphRow& row,
              const std::optional<std::string>& record_digest) {
  const CompileOptions& options = ctx.options;
  row.total_ms = std::chrono::duration<double, std::milli>(result.elapsed).count();
  for (const StageTime& s : result.stages)
    if (ctx.top_level_stages.count(s.stage))
      row.stage_ms[s.stage] += std::chrono::duration<double, std::milli>(s.elapsed).count();
  if (result.output) row.cache = std::string(to_string(result.output->cache.outcome));
  if (!result.ok()) {
    row.failed_stage =
        result.failed_stage.empty() ? std::string(to_string(result.status)) : result.failed_stage + " stage";
    row.message = strip_backtrace(result.message);
    return;
  }
  try {
    const CompileState& state = *result.output->state();
    row.cpu_fallbacks = state.cpu_fallbacks;
    row.backend_notes = state.compiled.notes;
    row.summary = summarize(state);
    if (!options.out_dir.empty())
      write_graph_outputs(state, *row.summary, std::filesystem::path(options.out_dir) / row.name, !options.no_svg);
  } catch (const std::exception& e) {
    row.failed_stage = "report";
    row.message = strip_backtrace(e.what());
    return;
  }
  const CacheOutcome outcome = result.output->cache.outcome;
  if (ctx.records && record_digest && (outcome == CacheOutcome::Miss || outcome == CacheOutcome::Hit))
    ctx.records->store(row.file, *record_digest, result.output->cache.key, row);
  if (!options.check) return;
  try {
    std::vector<std::string> diffs = check_against_eager(prepared, *result.output, options.seed);
    if (!diffs.empty()) {
      row.failed_stage = "check";
      row.message = fmt::format("differs from eager: {}", fmt::join(diffs, "; "));
    }
  } catch (const std::exception& e) {
    row.failed_stage = "check";
    row.message = strip_backtrace(e.what());
  }
}

Task<void> call_on_pool(const std::function<void(std::size_t)>& fn, std::size_t index) {
  fn(index);
  co_return;
}

// fn(0) ... fn(count - 1) on the scheduler's pool, `threads` at a time; fn handles its own errors.
void for_each_on_pool(Scheduler& scheduler, std::size_t count, std::size_t threads,
                      const std::function<void(std::size_t)>& fn) {
  sync_wait(bounded_for_each(scheduler, count, threads, [&fn](std::size_t i) { return call_on_pool(fn, i); }));
}

// A graph found by its file record: the record's row, and --out's files from the entry.
void fill_row_from_record(const BatchContext& ctx, FileRecords::Hit& hit, GraphRow& row) {
  GraphRow& recorded = hit.row;
  row.summary = recorded.summary;
  row.cpu_fallbacks = std::move(recorded.cpu_fallbacks);
  row.backend_notes = std::move(recorded.backend_notes);
  row.cache = std::string(to_string(CacheOutcome::Hit));
  row.from_record = true;
  ctx.settings.cache->count(CacheOutcome::Hit);
  if (ctx.options.out_dir.empty()) return;
  try {
    const AotConfig& config = ctx.records->config();
    // The entry may be another file's with the same program: the outputs carry this graph's name.
    auto artifact = std::make_shared<CompiledArtifact>(*hit.artifact);  // shares the graphs
    artifact->name = row.name;
    const auto state = state_of(*artifact, config, compile_on_first_call(artifact, config));
    write_graph_outputs(*state, *row.summary, std::filesystem::path(ctx.options.out_dir) / row.name,
                        !ctx.options.no_svg);
  } catch (const std::exception& e) {
    row.failed_stage = "report";
    row.message = strip_backtrace(e.what());
  }
}

// Whether file `index` was found by its record (then `row` is filled); sets `digest` when records are on.
bool found_by_record(const BatchContext& ctx, std::size_t index, GraphRow& row, std::optional<std::string>& digest) {
  if (!ctx.records || !ctx.files[index].error.empty()) return false;
  const auto start = StageEvent::Clock::now();
  digest = ctx.records->digest_of(ctx.files[index].path);
  if (!digest) return false;
  std::optional<FileRecords::Hit> hit = ctx.records->load(*digest);
  if (!hit) return false;
  fill_row_from_record(ctx, *hit, row);
  const auto end = StageEvent::Clock::now();
  row.total_ms = std::chrono::duration<double, std::milli>(end - start).count();
  if (ctx.trace) {
    const StageEvent event{row.name, "cache hit (file record)", start, std::this_thread::get_id(),
                           end,      std::this_thread::get_id()};
    ctx.trace->before_stage(event);
    ctx.trace->after_stage(event);
  }
  return true;
}

// Loads, compiles and reports the batch files `chunk` (batch indices). Loading files and
// reporting (summaries, --out, --check) run on the pool like the compiles: on the main thread
// they were a serial part that kept -j from scaling. A file found by its record is neither
// loaded nor compiled.
std::vector<IndexedRow> compile_chunk(const BatchContext& ctx, const std::vector<std::size_t>& chunk) {
  std::vector<IndexedRow> rows(chunk.size());
  std::vector<PreparedGraph> prepared(chunk.size());
  std::vector<std::optional<std::string>> record_digests(chunk.size());
  for_each_on_pool(ctx.scheduler, chunk.size(), ctx.threads, [&](std::size_t i) {
    const std::size_t index = chunk[i];
    GraphRow& row = rows[i].second;
    rows[i].first = index;
    row.file = ctx.files[index].path.string();
    row.name = ctx.names[index];
    if (found_by_record(ctx, index, row, record_digests[i])) return ctx.report(row.name, row.ok());
    prepared[i] = prepare(ctx.files[index], ctx.settings, row);
    row.name = ctx.names[index];
    if (prepared[i].job)
      prepared[i].job->name = row.name;
    else
      ctx.report(row.name, false);
  });
  std::vector<CompileJob> jobs;
  std::vector<std::size_t> row_of_job;
  for (std::size_t i = 0; i < chunk.size(); ++i) {
    if (!prepared[i].job) continue;
    jobs.push_back(std::move(*prepared[i].job));
    row_of_job.push_back(i);
  }
  BatchOptions batch{.max_concurrency = ctx.threads, .progress = [&ctx](const BatchProgress& p) {
                       ctx.report(p.job, p.status == JobStatus::Succeeded);
                     }};
  if (ctx.trace) batch.hooks.add(ctx.trace);
  std::vector<CompileResult> results = compile_batch(std::move(jobs), ctx.pipeline, ctx.scheduler, std::move(batch));
  for_each_on_pool(ctx.scheduler, results.size(), ctx.threads, [&](std::size_t j) {
    const std::size_t i = row_of_job[j];
    fill_row(ctx, prepared[i], results[j], rows[i].second, record_digests[i]);
  });
  return rows;
}

// Compiles the chunks `next_chunk` hands out (an empty one: no more) on `lanes` threads, so that
// while one chunk's last graphs finish the next chunk already fills the pool. Rows in batch order.
std::vector<IndexedRow> compile_chunks(const BatchContext& ctx,
                                       const std::function<std::vector<std::size_t>()>& next_chunk, std::size_t lanes) {
  std::mutex mutex;
  std::vector<IndexedRow> rows;
  std::exception_ptr error;
  auto lane = [&] {
    try {
      for (std::vector<std::size_t> chunk = next_chunk(); !chunk.empty(); chunk = next_chunk()) {
        std::vector<IndexedRow> done = compile_chunk(ctx, chunk);
        std::lock_guard lock(mutex);
        std::move(done.begin(), done.end(), std::back_inserter(rows));
      }
    } catch (...) {
      std::lock_guard lock(mutex);
      if (!error) error = std::current_exception();
    }
  };
  std::vector<std::thread> others;
  for (std::size_t i = 1; i < lanes; ++i) others.emplace_back(lane);
  lane();
  for (std::thread& t : others) t.join();
  if (error) std::rethrow_exception(error);
  std::sort(rows.begin(), rows.end(), [](const IndexedRow& a, const IndexedRow& b) { return a.first < b.first; });
  return rows;
}

int run_compile(const CompileOptions& options) {
  if (!options.shard.empty() && options.manifest.empty() && options.out_dir.empty())
    throw CLI::ValidationError("--shard", "needs --out DIR or --manifest FILE: where the shard's manifest goes");
  // Under mpirun rank 0 hands the batch out in chunks, every rank compiles, rank 0 reports.
  std::unique_ptr<MpiSession> mpi;
  if (launched_by_mpirun()) {
    if (!options.shard.empty())
      throw CLI::ValidationError("--shard", "under mpirun the ranks split the batch themselves; drop --shard");
    mpi = std::make_unique<MpiSession>();
  }
  const bool reporter = !mpi || mpi->rank() == 0;  // prints the progress and the report
  JobSettings settings{options.device,
                       options.seed,
                       options.no_cpu_fallback,
                       partitioner_option(options.partitioner),
                       options.no_cache ? nullptr : open_compile_cache(options.cache_dir, options.remote_cache),
                       backend_named(options.backend)};
  // A bad pipeline text is a usage error, reported before any work (exit 2 from main).
  const Pipeline<CompileState> pipeline = compile_stage_registry().parse(options.pipeline, "aot");
  std::vector<std::string> stage_columns;  // the top-level stages, in pipeline order
  for (const StageSpec& spec : parse_pipeline_text(options.pipeline)) stage_columns.push_back(spec.name);

  const std::vector<GraphFile> files = collect_graph_files(options.inputs, {kGraphExtension, kExportExtension});
  std::vector<std::string> hints;
  hints.reserve(files.size());
  for (const GraphFile& file : files) hints.push_back(graph_name_hint(file));
  const std::vector<std::string> names = unique_names(hints);
  // The batch indices this process compiles, unless rank 0 hands them out: all, or --shard's.
  std::optional<ShardSpec> shard;
  if (!options.shard.empty()) shard = parse_shard(options.shard);
  if (mpi) shard = ShardSpec{static_cast<std::size_t>(mpi->rank()), static_cast<std::size_t>(mpi->size())};
  std::vector<std::size_t> mine(files.size());
  std::iota(mine.begin(), mine.end(), 0);
  if (shard && !mpi) {
    const std::vector<std::size_t> shard_of = assign_shards(files, shard->count);
    std::erase_if(mine, [&](std::size_t i) { return shard_of[i] != shard->index; });
  }
  const std::string batch_name = shard ? batch_id(files, shard->count) : std::string();

  const std::size_t threads = options.jobs ? options.jobs : Scheduler::default_thread_count();
  Scheduler scheduler(threads);
  ProgressDisplay progress(stderr_is_terminal());
  std::mutex progress_mutex;
  BatchProgress shown;
  shown.total = mpi ? files.size() : mine.size();
  // Rank 0's bar counts every rank's graphs; the other ranks report theirs to it.
  auto show = [&](std::string_view job, bool ok) {
    std::lock_guard lock(progress_mutex);
    ++shown.finished;
    (ok ? shown.succeeded : shown.failed) += 1;
    shown.job = job;
    shown.status = ok ? JobStatus::Succeeded : JobStatus::Failed;
    progress.update(shown);
  };
  if (options.check) {
    // Checks compare in full float32: with TF32, eager's cuDNN kernels (an LSTM) and the compiled
    // graph's decomposition round differently by ~1e-3, which hides real differences.
    at::globalContext().setAllowTF32CuDNN(false);
    at::globalContext().setAllowTF32CuBLAS(false);
  }
  auto trace = options.trace_file.empty() ? nullptr : std::make_shared<ChromeTraceRecorder>();
  const std::unique_ptr<FileRecords> records =
      options.check ? nullptr : FileRecords::open(settings, pipeline.to_string());
  BatchContext ctx{options,
                   settings,
                   files,
                   names,
                   pipeline,
                   scheduler,
                   threads,
                   std::set<std::string>(stage_columns.begin(), stage_columns.end()),
                   trace,
                   records.get(),
                   [&](std::string_view name, bool ok) {
                     if (reporter) return show(name, ok);
                     mpi->send_progress(ok, std::string(name));
                   }};

  const auto start = std::chrono::steady_clock::now();
  std::vector<IndexedRow> compiled;
  std::vector<std::string> received;  // rank 0: the other ranks' manifests
  if (!mpi) {
    std::atomic<bool> taken = false;  // one chunk: everything this process compiles
    compiled = compile_chunks(
        ctx, [&] { return taken.exchange(true) ? std::vector<std::size_t>() : mine; }, 1);
  } else {
    // Each chunk fills this rank's pool at least twice; two lanes overlap one chunk's tail with the next.
    const std::size_t at_least = 2 * threads;
    if (reporter) {
      const std::vector<std::uintmax_t> costs = estimated_costs(files);
      ChunkDispenser dispenser(largest_first(files, costs), costs, static_cast<std::size_t>(mpi->size()));
      std::thread server([&] {
        received = mpi->serve(dispenser, [&](int rank, bool ok, const std::string& name) {
          show(fmt::format("{} (rank {})", name, rank), ok);
        });
      });
      std::exception_ptr error;
      try {
        compiled = compile_chunks(
            ctx, [&] { return dispenser.next(at_least); }, 2);
      } catch (...) {
        error = std::current_exception();  // the other ranks still drain the dispenser, so serve() ends
      }
      server.join();
      if (error) std::rethrow_exception(error);
    } else {
      compiled = compile_chunks(
          ctx, [&] { return mpi->request_chunk(at_least); }, 2);
    }
  }
  double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  std::vector<GraphRow> rows;
  std::vector<std::size_t> batch_indices;
  for (auto& [index, row] : compiled) {
    batch_indices.push_back(index);
    rows.push_back(std::move(row));
  }
  const std::string host = host_name();
  if (mpi)
    for (GraphRow& row : rows) row.origin = fmt::format("rank {} on {}", mpi->rank(), host);
  // What this shard or rank did, for `aotpipe gather` or rank 0.
  std::optional<ShardManifest> manifest;
  if (shard)
    manifest = ShardManifest{*shard, batch_name, files.size(), stage_columns, batch_indices, rows, wall, threads, host};
  if (mpi) {
    if (!reporter) {
      mpi->send_manifest(manifest_json(*manifest));
      if (trace) trace->save(fmt::format("{}.rank{}", options.trace_file, mpi->rank()));
      // Rank 0's status is the batch's: a non-zero status here would make mpirun abort rank 0
      // while it prints the report.
      return 0;
    }
    std::vector<std::pair<std::string, ShardManifest>> manifests{{"rank 0", std::move(*manifest)}};
    for (std::size_t r = 1; r < received.size(); ++r)
      manifests.emplace_back(fmt::format("rank {}", r), parse_manifest(received[r], fmt::format("rank {}", r)));
    progress.finish();
    MergedBatch merged = merge_manifests(manifests, "rank");
    rows = std::move(merged.rows);
    wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    print_table(rows, stage_columns);
    print_summary(rows, wall,
                  fmt::format("{} MPI ranks on {} host{}, {} worker threads in all", merged.num_shards, merged.hosts,
                              merged.hosts == 1 ? "" : "s", merged.threads));
  } else {
    progress.finish();
    print_table(rows, stage_columns);
    print_summary(rows, wall, fmt::format("{} worker threads", threads));
  }
  if (shard && !mpi) {
    const std::filesystem::path path = options.manifest.empty() ? default_manifest_path(options.out_dir, *shard)
                                                                : std::filesystem::path(options.manifest);
    write_manifest(path, *manifest);
    fmt::print("\nShard {}/{}: {} of the batch's {} graph files; manifest {} (merge with aotpipe gather)\n",
               shard->index, shard->count, rows.size(), files.size(), path.string());
  }
  if (trace) {
    trace->save(options.trace_file);
    fmt::print("\nChrome trace: {}\n", options.trace_file);
  }
  if (!options.out_dir.empty()) fmt::print("Outputs: {}/<graph>/\n", options.out_dir);
  return std::all_of(rows.begin(), rows.end(), [](const GraphRow& r) { return r.ok(); }) ? 0 : 1;
}

}  // namespace

// "name (parameter): summary" for every stage, separated by `separator`.
static std::string stage_list(std::string_view separator) {
  std::string out;
  for (const CompileStageEntry& stage : compile_stages())
    out += fmt::format("{}{}{}: {}", separator, stage.name,
                       stage.parameter.empty() ? "" : fmt::format("({})", stage.parameter), stage.summary);
  return out;
}

Command add_compile_command(CLI::App& parent) {
  auto options = std::make_shared<CompileOptions>();
  CLI::App* app = parent.add_subcommand(
      "compile", fmt::format("Compile graph files ahead of time ({}), concurrently, and report each", [] {
        std::vector<std::string_view> names;
        for (const CompileStageEntry& stage : compile_stages()) names.push_back(stage.name);
        return fmt::format("{}", fmt::join(names, ", "));
      }()));
  app->add_option("inputs", options->inputs,
                  "Graph files (.aotg) and torch.export archives (.pt2), or directories searched recursively for "
                  "both")
      ->required();
  app->add_option("-j,--jobs", options->jobs, "Graphs compiled at once (worker threads); 0: one per core")
      ->capture_default_str();
  app->add_option("--pipeline", options->pipeline, "The stages, as text: " + stage_list("\n  "))->capture_default_str();
  app->add_flag_callback(
      "--list-stages",
      [] {
        // The stage table of docs/cli.md, checked against this output by the cli_stages_in_docs test.
        fmt::print("| stage | parameter | what it does |\n|---|---|---|\n");
        for (const CompileStageEntry& stage : compile_stages())
          fmt::print("| `{}` | {} | {} |\n", stage.name, stage.parameter.empty() ? "-" : stage.parameter,
                     stage.summary);
        throw CLI::Success();
      },
      "Print the compile stages (the names --pipeline takes) and exit");
  app->add_option("--partitioner", options->partitioner,
                  "Partitioner of the joint graph; auto: the backend's (for the interpreter and planned, min-cut "
                  "without the fusion heuristic ban_recompute_used_far_apart, docs/stages/partition.md; default "
                  "for cuda_graphs, docs/cuda-graphs.md); min_cut: PyTorch's, with PyTorch's settings")
      ->check(CLI::IsMember(partitioner_names()))
      ->capture_default_str();
  app->add_option("--backend", options->backend,
                  "Backend compiler of the forward, backward and inference graphs: interpreter, or cuda_graphs "
                  "(captured into CUDA graphs at their first call, docs/cuda-graphs.md; what --check runs)")
      ->check(CLI::IsMember(backend_names()))
      ->capture_default_str();
  app->add_option("--out", options->out_dir,
                  "Write, per graph, DIR/<graph>/: forward.aotg, backward.aotg (or inference.aotg), joint.aotg, "
                  "metadata.json, partition.txt, joint.dot and joint.svg");
  app->add_option("--trace", options->trace_file, "Write a Chrome trace of the batch (chrome://tracing, Perfetto)");
  app->add_flag("--check", options->check,
                "Run each compiled function against the graph run eagerly on random inputs: outputs, input "
                "mutations, aliasing and gradients must match");
  app->add_flag("--no-svg", options->no_svg, "Do not render joint.svg with Graphviz");
  app->add_option("--seed", options->seed, "Seed of the example inputs and constants")->capture_default_str();
  app->add_option("--device", options->device,
                  "Compile every graph for this device (e.g. cuda:0): CPU values, inputs, constants and factory "
                  "devices are moved to it. Needs no GPU, except with --check")
      ->check([](const std::string& text) -> std::string {
        try {
          (void)c10::Device(text);
          return {};
        } catch (const std::exception&) { return "not a device: '" + text + "' (cpu, cuda, cuda:1...)"; }
      });
  app->add_option("--shard", options->shard,
                  "K/N: compile only the K-th (from 0) of N deterministic shards of the batch, balanced by file "
                  "size, and write a manifest for `aotpipe gather` (Slurm arrays, Kubernetes Indexed Jobs)")
      ->check([](const std::string& text) -> std::string {
        try {
          parse_shard(text);
          return {};
        } catch (const std::exception& e) { return e.what(); }
      });
  app->add_option("--manifest", options->manifest,
                  "Where --shard writes its manifest (default: OUT/shards/shard-K-of-N.json)");
  app->add_option("--cache-dir", options->cache_dir,
                  fmt::format("The compile cache's folder (default: {}); a graph compiled before with the same "
                              "inputs, options and aotpipe build is loaded instead of compiled",
                              CompileCache::default_directory().string()));
  app->add_flag("--no-cache", options->no_cache, "Compile everything; neither read nor write the compile cache");
  app->add_option("--remote-cache", options->remote_cache,
                  "redis://HOST:PORT: a level under the local cache shared by machines and runs (entries checked "
                  "as local ones; its first error turns it off with a warning)");
  app->add_flag("--no-cpu-fallback", options->no_cpu_fallback,
                "Make every compile truly fake: an op with no Meta kernel fails its graph (naming the op) instead "
                "of running its CPU kernel on zero-filled tensors");
  app->add_option("--package", options->package,
                  "Compile the one .pt2 input into this package (.aotpkg): training and inference compiles per "
                  "--sizes, the program's state stored once; aotpipe::load_package runs it with no compiler "
                  "(docs/packages.md)");
  app->add_option("--sizes", options->sizes,
                  "With --package: user input sizes to compile for, one set per use (8x256,8x256); default: the "
                  "archive's sample inputs'");
  return {app,
          [options] {
            if (options->package.empty()) {
              if (!options->sizes.empty()) throw CLI::ValidationError("--sizes", "only goes with --package");
              return run_compile(*options);
            }
            if (options->inputs.size() != 1 || !options->inputs[0].ends_with(kExportExtension))
              throw CLI::ValidationError("--package", "takes exactly one torch.export archive (.pt2) as input");
            for (const std::string& text : options->sizes) {
              try {
                (void)parse_sizes(text);
              } catch (const std::invalid_argument& e) { throw CLI::ValidationError("--sizes", e.what()); }
            }
            return write_package_command({options->inputs[0], options->package, options->device, options->sizes,
                                          options->backend, options->partitioner, options->no_cpu_fallback});
          },
          [options] { return names_cuda(options->device, options->backend); }};
}

}  // namespace aotpipe::cli
