// aotpipe compile INPUT... [-j N] [--pipeline SPEC] [--partitioner min_cut|default] [--out DIR]
//                          [--trace FILE] [--check] [--no-svg] [--seed N] [--device D]
//                          [--no-cpu-fallback]
//
// Every graph file (a directory stands for its *.aotg and *.pt2 files, recursively) is read as a
// user program: its forward function, with example inputs made from the inputs' TensorMeta. A
// torch.export archive (.pt2) is imported (export/exported_program.h) and its flat function
// compiled: lifted parameters, buffers and constants, then the user inputs. All of
// them are compiled concurrently with compile_batch (metadata, dedupe, synthetic base, joint,
// partition, compile; tracing on fake tensors). A file that cannot be read, parsed, verified or
// compiled is reported with its stage and message, and the rest of the batch completes. Then a
// summary table (ops, time per stage, CPU-fallback calls, saved bytes under default vs min-cut);
// the exit status is 1 when anything failed.
#include "aotpipe/commands.h"
#include "aotpipe/compile_report.h"
#include "aotpipe/exported_programs.h"
#include "aotpipe/graph_files.h"
#include "aotpipe/load_graph.h"
#include "aotpipe/progress.h"
#include "aotpipe/random_inputs.h"

#include <aotpipe/graph/device_retarget.h>
#include <aotpipe/pipeline/chrome_trace.h>
#include <aotpipe/pipeline/scheduler.h>
#include <aotpipe/runtime/compile_batch.h>
#include <aotpipe/runtime/compile_pipeline.h>
#include <aotpipe/runtime/eager_equivalence.h>
#include <aotpipe/runtime/graph_function.h>

#include <ATen/CPUGeneratorImpl.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace aotpipe::cli {
namespace {

struct CompileOptions {
  std::vector<std::string> inputs;
  std::size_t jobs = 0;  // 0: the machine's cores
  std::string pipeline = default_compile_pipeline_text();
  std::string partitioner = "min_cut";
  std::string out_dir;
  std::string trace_file;
  bool check = false;
  bool no_svg = false;
  uint64_t seed = 0;
  std::string device;  // empty: as the graph files say
  bool no_cpu_fallback = false;
};

// One row of the report: a graph file, compiled or not.
struct GraphRow {
  std::string file;
  std::string name;  // the graph's, or the file's stem when it could not be read
  std::optional<GraphSummary> summary;
  std::map<std::string, double> stage_ms;  // top-level stages
  CpuFallbackCounts cpu_fallbacks;         // ops its fake traces ran on the CPU kernel
  double total_ms = 0;
  std::string failed_stage;  // empty: ok
  std::string message;
  bool ok() const { return failed_stage.empty(); }
};

// A graph file (or torch.export archive) loaded and turned into a compile job, or the reason it
// could not be.
struct PreparedGraph {
  std::shared_ptr<Graph> graph;            // an .aotg file
  std::optional<ExportedProgram> program;  // a .pt2 archive
  std::optional<CompileJob> job;
};

CompileJob make_job(std::string name, Function fn, TensorList example_args, const CompileOptions& options,
                    const Partitioner& partitioner) {
  CompileJob job{std::move(name), std::move(fn), std::move(example_args), {}};
  job.config.partition_fn = partitioner;
  job.config.allow_cpu_fallback = !options.no_cpu_fallback;
  return job;
}

// A .pt2 archive: its flat function (lifted state, then user inputs) compiled on metadata examples
// of its graph's inputs, as an .aotg graph is.
void prepare_exported(const GraphFile& file, const CompileOptions& options, const Partitioner& partitioner,
                      GraphRow& row, PreparedGraph& prepared) {
  try {
    LoadExportedProgramOptions load;
    if (!options.device.empty()) load.device = c10::Device(options.device);
    prepared.program = load_exported_program(file.path, load);
  } catch (const std::exception& e) {
    row.failed_stage = "import error";
    row.message = strip_backtrace(e.what());
    return;
  }
  const ExportedProgram& program = *prepared.program;
  row.name = program.name();
  try {
    CompileJob job = make_job(row.name, program.flat_function(), metadata_example_args(program.graph()), options,
                              partitioner);
    job.config.num_params_buffers = program.lifted_tensors().size();
    prepared.job = std::move(job);
  } catch (const std::exception& e) {
    row.failed_stage = "unsupported";
    row.message = strip_backtrace(e.what());
  }
}

PreparedGraph prepare(const GraphFile& file, const CompileOptions& options, const Partitioner& partitioner,
                      GraphRow& row) {
  PreparedGraph prepared;
  row.name = file.path.stem().string();  // until the graph's own name is known
  if (!file.error.empty()) {
    row.failed_stage = to_string(FailureStage::Read);
    row.message = file.error;
    return prepared;
  }
  if (is_exported_program_file(file.path)) {
    prepare_exported(file, options, partitioner, row, prepared);
    return prepared;
  }
  LoadedGraph loaded = load_graph(file.path);
  if (loaded.failure) {
    row.failed_stage = to_string(loaded.failure->stage);
    row.message = loaded.failure->message;
    return prepared;
  }
  prepared.graph = std::make_shared<Graph>(std::move(*loaded.graph));
  row.name = prepared.graph->name();
  try {
    if (!options.device.empty()) retarget_device(*prepared.graph, c10::Device(options.device));
    auto gen = at::make_generator<at::CPUGeneratorImpl>(options.seed);
    bind_random_constants(*prepared.graph, gen);
    // Compiles are fake: metadata examples, so no data is made and no device is needed.
    prepared.job = make_job(row.name, graph_function(prepared.graph), metadata_example_args(*prepared.graph), options,
                            partitioner);
  } catch (const std::exception& e) {
    row.failed_stage = "unsupported";
    row.message = strip_backtrace(e.what());
  }
  return prepared;
}

// Graph names label jobs, output folders and trace events: make them unique ("name", "name#2").
void make_names_unique(std::vector<GraphRow>& rows, std::vector<PreparedGraph>& prepared) {
  std::map<std::string, int> seen;
  for (std::size_t i = 0; i < rows.size(); ++i) {
    if (!prepared[i].job) continue;
    const int n = ++seen[rows[i].name];
    if (n > 1) rows[i].name = fmt::format("{}#{}", rows[i].name, n);
    prepared[i].job->name = rows[i].name;
  }
}

// Runs the compiled function against the graph run eagerly on fresh random inputs (a .pt2: on
// copies of its state and its sample inputs).
std::vector<std::string> check_against_eager(const PreparedGraph& prepared, const CompileOutput& compiled,
                                             uint64_t seed) {
  if (prepared.program) {
    const ExportedProgram& program = *prepared.program;
    return compare_with_eager(program.flat_function(), compiled.runtime,
                              [&program, seed] { return check_inputs(program, seed + 1); });
  }
  const Graph& graph = *prepared.graph;
  auto make_inputs = [&graph, seed] {
    auto gen = at::make_generator<at::CPUGeneratorImpl>(seed + 1);
    return example_args(graph, gen);
  };
  return compare_with_eager(graph_function(prepared.graph), compiled.runtime, make_inputs);
}

std::string fmt_ms(double ms) { return ms >= 100 ? fmt::format("{:.0f}", ms) : fmt::format("{:.2f}", ms); }
std::string fmt_bytes(const std::optional<PartitionNumbers>& n) { return n ? std::to_string(n->saved_bytes) : "-"; }

void print_table(const std::vector<GraphRow>& rows, const std::vector<std::string>& stages) {
  std::size_t name_width = 5;
  for (const GraphRow& r : rows) name_width = std::max(name_width, r.name.size());
  fmt::print("{:<{}} {:>6} {:>5} {:>5}", "graph", name_width, "ops", "fw", "bw");
  for (const std::string& s : stages) fmt::print(" {:>{}}", s, std::max<std::size_t>(s.size(), 7));
  fmt::print(" {:>9} {:>8} {:>14} {:>14}  {}\n", "total ms", "fallback", "saved default", "saved min_cut", "result");
  for (const GraphRow& r : rows) {
    const GraphSummary* s = r.summary ? &*r.summary : nullptr;
    fmt::print("{:<{}} {:>6} {:>5} {:>5}", r.name, name_width, s ? std::to_string(s->ops) : "-",
               s ? std::to_string(s->forward_ops) : "-", s && s->training ? std::to_string(s->backward_ops) : "-");
    for (const std::string& stage : stages) {
      auto it = r.stage_ms.find(stage);
      fmt::print(" {:>{}}", it == r.stage_ms.end() ? "-" : fmt_ms(it->second), std::max<std::size_t>(stage.size(), 7));
    }
    fmt::print(" {:>9} {:>8} {:>14} {:>14}  {}\n", r.total_ms > 0 ? fmt_ms(r.total_ms) : "-",
               s ? std::to_string(total_cpu_fallback_calls(r.cpu_fallbacks)) : "-", s ? fmt_bytes(s->default_partition) : "-", s ? fmt_bytes(s->min_cut) : "-",
               r.ok() ? "ok" : fmt::format("FAILED {}", r.failed_stage));
  }
}

// Which ops ran their CPU kernel on zero-filled tensors instead of a Meta kernel, in how many
// graphs: a compile of the others was truly fake.
void print_cpu_fallbacks(const std::vector<GraphRow>& rows) {
  CpuFallbackCounts total;
  std::map<std::string, std::size_t> graphs_per_op;
  std::size_t graphs = 0;
  for (const GraphRow& r : rows) {
    merge_cpu_fallbacks(total, r.cpu_fallbacks);
    for (const auto& [op, calls] : r.cpu_fallbacks) ++graphs_per_op[op];
    graphs += r.cpu_fallbacks.empty() ? 0 : 1;
  }
  if (total.empty()) {
    fmt::print("  CPU fallback: none (every trace ran on Meta kernels only)\n");
    return;
  }
  auto count = [](std::size_t n, const char* noun) { return fmt::format("{} {}{}", n, noun, n == 1 ? "" : "s"); };
  fmt::print("  CPU fallback: {} in {} (ops without a Meta kernel ran on zero-filled CPU tensors):\n",
             count(total_cpu_fallback_calls(total), "call"), count(graphs, "graph"));
  for (const auto& [op, calls] : total)
    fmt::print("    {:<48} {:>10} in {}\n", op, count(calls, "call"), count(graphs_per_op[op], "graph"));
}

void print_summary(const std::vector<GraphRow>& rows, double wall_seconds, std::size_t threads) {
  std::size_t failed = 0, compiled = 0;
  int64_t saved_default = 0, saved_min_cut = 0;
  for (const GraphRow& r : rows) {
    failed += r.ok() ? 0 : 1;
    if (r.summary) ++compiled;
    if (r.summary && r.summary->default_partition) {
      saved_default += r.summary->default_partition->saved_bytes;
      saved_min_cut += r.summary->min_cut->saved_bytes;
    }
  }
  fmt::print("\nSummary\n");
  fmt::print("  {:>8}  {:>8}  {:>8}  {:>10}  {:>10}  {:>14}  {:>14}\n", "graphs", "ok", "failed", "wall s", "graphs/s",
             "saved default", "saved min_cut");
  fmt::print("  {:>8}  {:>8}  {:>8}  {:>10.2f}  {:>10.1f}  {:>14}  {:>14}\n", rows.size(), rows.size() - failed, failed,
             wall_seconds, wall_seconds > 0 ? compiled / wall_seconds : 0.0, saved_default, saved_min_cut);
  fmt::print("  ({} worker threads)\n", threads);
  print_cpu_fallbacks(rows);
  if (!failed) return;
  fmt::print("\nFailures\n");
  for (const GraphRow& r : rows) {
    if (r.ok()) continue;
    fmt::print("  {} ({}): {}:\n", r.file, r.name, r.failed_stage);
    print_message_lines(r.message, "    ");
  }
}

int run_compile(const CompileOptions& options) {
  const Partitioner partitioner = partitioner_named(options.partitioner);
  // A bad pipeline text is a usage error, reported before any work (exit 2 from main).
  const Pipeline<CompileState> pipeline = compile_stage_registry().parse(options.pipeline, "aot");

  const std::vector<GraphFile> files = collect_graph_files(options.inputs, {kGraphExtension, kExportExtension});
  std::vector<GraphRow> rows(files.size());
  std::vector<PreparedGraph> prepared(files.size());
  for (std::size_t i = 0; i < files.size(); ++i) {
    rows[i].file = files[i].path.string();
    prepared[i] = prepare(files[i], options, partitioner, rows[i]);
  }
  make_names_unique(rows, prepared);

  std::vector<CompileJob> jobs;
  std::vector<std::size_t> row_of_job;
  for (std::size_t i = 0; i < prepared.size(); ++i) {
    if (!prepared[i].job) continue;
    jobs.push_back(*prepared[i].job);
    row_of_job.push_back(i);
  }

  const std::size_t threads = options.jobs ? options.jobs : Scheduler::default_thread_count();
  Scheduler scheduler(threads);
  ProgressDisplay progress(stderr_is_terminal());
  BatchOptions batch{.max_concurrency = threads, .progress = [&progress](const BatchProgress& p) { progress.update(p); }};
  auto trace = options.trace_file.empty() ? nullptr : std::make_shared<ChromeTraceRecorder>();
  if (trace) batch.hooks.add(trace);

  const auto start = std::chrono::steady_clock::now();
  std::vector<CompileResult> results = compile_batch(std::move(jobs), pipeline, scheduler, std::move(batch));
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  progress.finish();

  std::vector<std::string> stage_columns;  // the top-level stages, in pipeline order
  for (const StageSpec& spec : parse_pipeline_text(options.pipeline)) stage_columns.push_back(spec.name);
  const std::set<std::string> top_level_stages(stage_columns.begin(), stage_columns.end());

  for (std::size_t j = 0; j < results.size(); ++j) {
    CompileResult& result = results[j];
    GraphRow& row = rows[row_of_job[j]];
    row.total_ms = std::chrono::duration<double, std::milli>(result.elapsed).count();
    for (const StageTime& s : result.stages)
      if (top_level_stages.count(s.stage)) row.stage_ms[s.stage] += std::chrono::duration<double, std::milli>(s.elapsed).count();
    if (!result.ok()) {
      row.failed_stage = result.failed_stage.empty() ? std::string(to_string(result.status)) : result.failed_stage + " stage";
      row.message = strip_backtrace(result.message);
      continue;
    }
    try {
      const CompileState& state = *result.output->state;
      row.cpu_fallbacks = state.cpu_fallbacks;
      row.summary = summarize(state);
      if (!options.out_dir.empty())
        write_graph_outputs(state, *row.summary, std::filesystem::path(options.out_dir) / row.name, !options.no_svg);
    } catch (const std::exception& e) {
      row.failed_stage = "report";
      row.message = strip_backtrace(e.what());
      continue;
    }
    if (options.check) {
      try {
        std::vector<std::string> diffs = check_against_eager(prepared[row_of_job[j]], *result.output, options.seed);
        if (!diffs.empty()) {
          row.failed_stage = "check";
          row.message = fmt::format("differs from eager: {}", fmt::join(diffs, "; "));
        }
      } catch (const std::exception& e) {
        row.failed_stage = "check";
        row.message = strip_backtrace(e.what());
      }
    }
  }

  print_table(rows, stage_columns);
  print_summary(rows, wall, threads);
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
  app->add_option("--pipeline", options->pipeline, "The stages, as text: " + stage_list("\n  "))
      ->capture_default_str();
  app->add_flag_callback(
      "--list-stages",
      [] {
        // The stage table of docs/cli.md, checked against this output by the cli_stages_in_docs test.
        fmt::print("| stage | parameter | what it does |\n|---|---|---|\n");
        for (const CompileStageEntry& stage : compile_stages())
          fmt::print("| `{}` | {} | {} |\n", stage.name, stage.parameter.empty() ? "-" : stage.parameter, stage.summary);
        throw CLI::Success();
      },
      "Print the compile stages (the names --pipeline takes) and exit");
  app->add_option("--partitioner", options->partitioner, "Partitioner of the joint graph")
      ->check(CLI::IsMember({"min_cut", "default"}))
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
        } catch (const std::exception&) {
          return "not a device: '" + text + "' (cpu, cuda, cuda:1...)";
        }
      });
  app->add_flag("--no-cpu-fallback", options->no_cpu_fallback,
                "Make every compile truly fake: an op with no Meta kernel fails its graph (naming the op) instead "
                "of running its CPU kernel on zero-filled tensors");
  return {app, [options] { return run_compile(*options); }};
}

}  // namespace aotpipe::cli
