// aotpipe run INPUT... [--seed N] [--check-meta]
//
// A package (.aotpkg) is loaded (aotpipe::load_package) and each of its compiles called once on
// random inputs of its sizes, a training compile forward and backward; its line gives the time
// of those calls.
// For every graph file (a directory stands for its *.aotg files, sorted, recursively): parse,
// verify, bind random tensors to its constants, run it in the Interpreter on random inputs
// made from the inputs' TensorMeta, and print one line. A file that fails at any step is
// reported with its path and the error, and the others still run. Then a summary; the exit
// status is 1 when anything failed.
#include "aotpipe/commands.h"
#include "aotpipe/graph_files.h"
#include "aotpipe/load_graph.h"
#include "aotpipe/packages.h"
#include "aotpipe/random_inputs.h"

#include <aotpipe/graph/interpreter.h>

#include <ATen/CPUGeneratorImpl.h>
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <exception>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace aotpipe::cli {
namespace {

struct RunOptions {
  std::vector<std::string> inputs;
  uint64_t seed = 0;
  bool check_meta = false;
};

struct RunResult {
  std::string file;
  std::string name = "-";
  std::optional<std::size_t> num_inputs, num_nodes, num_outputs;
  double ms = 0;
  std::optional<Failure> failure;
};

std::string count(const std::optional<std::size_t>& n) { return n ? std::to_string(*n) : "-"; }

// Runs a parsed, verified graph once; throws on any error (bad inputs, a failing op, a
// TensorMeta mismatch with check_meta, a wrong number of results).
double run_graph(Graph& graph, const RunOptions& options) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(options.seed);
  std::size_t bound = bind_random_constants(graph, gen);
  if (bound) spdlog::info("{}: bound {} random constant(s)", graph.name(), bound);
  auto inputs = make_inputs(graph, gen);
  auto start = std::chrono::steady_clock::now();
  Interpreter interpreter(graph, InterpreterOptions{.check_meta = options.check_meta});
  auto outputs = interpreter.run_boxed(std::move(inputs));
  double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  if (outputs.size() != graph.num_outputs()) {
    throw GraphError(
        fmt::format("graph '{}' returned {} values, declares {}", graph.name(), outputs.size(), graph.num_outputs()));
  }
  return ms;
}

RunResult run_file(const GraphFile& file, const RunOptions& options) {
  RunResult r;
  r.file = file.path.string();
  if (!file.error.empty()) {
    r.failure = Failure{FailureStage::Read, file.error, {}};
    return r;
  }
  spdlog::info("reading {}", r.file);
  if (file.path.extension() == kPackageExtension) {
    r.name = file.path.stem().string();
    try {
      const PackageRun run = run_package(file.path, options.seed);
      r.num_inputs = run.num_inputs;
      r.num_outputs = run.num_outputs;
      r.ms = run.ms;
    } catch (const std::exception& e) { r.failure = Failure{FailureStage::Run, strip_backtrace(e.what()), {}}; }
    return r;
  }
  LoadedGraph loaded = load_graph(file.path);
  if (loaded.failure) {
    r.failure = std::move(loaded.failure);
    return r;
  }
  Graph& graph = *loaded.graph;
  r.name = graph.name();
  r.num_inputs = graph.num_inputs();
  r.num_nodes = graph.num_nodes();
  r.num_outputs = graph.num_outputs();
  try {
    r.ms = run_graph(graph, options);
  } catch (const std::exception& e) {
    spdlog::debug("{}: {}", r.file, e.what());  // with c10's backtrace, if any
    r.failure = Failure{FailureStage::Run, strip_backtrace(e.what()), {}};
  }
  return r;
}

// One report line: graph, file, #inputs, #nodes, #outputs, time, result. The file column is as
// wide as the longest path (all are known before the first graph runs).
void print_line(std::size_t file_width, const std::string& name, const std::string& file, const std::string& inputs,
                const std::string& nodes, const std::string& outputs, const std::string& time,
                const std::string& result) {
  fmt::print("{:<24} {:<{}} {:>6} {:>5} {:>7} {:>10}  {}\n", name, file, file_width, inputs, nodes, outputs, time,
             result);
}

void print_row(std::size_t file_width, const RunResult& r) {
  std::string status =
      r.failure ? fmt::format("FAILED {}: {}", to_string(r.failure->stage), r.failure->one_line()) : "ok";
  std::string time = r.failure ? "-" : fmt::format("{:.2f} ms", r.ms);
  print_line(file_width, r.name, r.file, count(r.num_inputs), count(r.num_nodes), count(r.num_outputs), time, status);
  std::fflush(stdout);
}

void print_summary(const std::vector<RunResult>& results) {
  std::size_t failed = 0;
  for (const auto& r : results) failed += r.failure ? 1 : 0;
  fmt::print("\nSummary\n");
  fmt::print("  {:>8}  {:>8}  {:>8}\n", "graphs", "ok", "failed");
  fmt::print("  {:>8}  {:>8}  {:>8}\n", results.size(), results.size() - failed, failed);
  if (!failed) return;
  fmt::print("\nFailures\n");
  for (const auto& r : results) {
    if (!r.failure) continue;
    const std::string& msg = r.failure->message;
    if (msg.find('\n') == std::string::npos) {
      fmt::print("  {}: {}: {}\n", r.file, to_string(r.failure->stage), msg);
    } else {
      fmt::print("  {}: {}:\n", r.file, to_string(r.failure->stage));
      print_message_lines(msg, "    ");
    }
  }
}

}  // namespace

Command add_run_command(CLI::App& parent) {
  auto options = std::make_shared<RunOptions>();
  CLI::App* app = parent.add_subcommand("run", "Run graph files on random inputs in the interpreter and report each");
  app->add_option("inputs", options->inputs,
                  "Graph files or packages (.aotpkg), or directories searched recursively for *.aotg")
      ->required();
  app->add_option("--seed", options->seed, "Seed of the random inputs and constants")->capture_default_str();
  app->add_flag("--check-meta", options->check_meta,
                "Check every value the interpreter produces against its declared TensorMeta (sizes, strides, dtype)");

  return {app,
          [options] {
            auto files = collect_graph_files(options->inputs);
            std::size_t file_width = 4;
            for (const GraphFile& file : files) file_width = std::max(file_width, file.path.string().size());
            print_line(file_width, "graph", "file", "inputs", "nodes", "outputs", "time", "result");
            std::vector<RunResult> results;
            results.reserve(files.size());
            for (const GraphFile& file : files) {
              results.push_back(run_file(file, *options));
              print_row(file_width, results.back());
            }
            print_summary(results);
            for (const auto& r : results)
              if (r.failure) return 1;
            return 0;
          },
          [options] { return packages_name_cuda(options->inputs); }};
}

}  // namespace aotpipe::cli
