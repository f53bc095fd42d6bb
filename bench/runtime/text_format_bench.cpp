// What the compile cache spends per graph node on the text form: every graph a compile of the
// example corpus makes (programs, joint, forward, backward, inference graphs) printed, parsed back,
// verified as an artifact load verifies it, and the programs canonicalized as the cache key does.
// A cache store prints; a hit parses and verifies; every lookup canonicalizes the program.
// Medians over --repeats runs (default 5), one thread. Run: build/bench/runtime/text_format_bench
// (`--only parse` and a large --repeats give a profiler one step to look at).
#include "aotpipe/compile_jobs.h"
#include "median_time.h"

#include <aotpipe/runtime/artifact_serialization.h>
#include <aotpipe/graph/parser.h>
#include <aotpipe/graph/printer.h>
#include <aotpipe/graph/verifier.h>
#include <aotpipe/driver/aot_function.h>
#include <aotpipe/cache/cache_key.h>
#include <aotpipe/stages/partition/min_cut_partition.h>

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace {

using namespace aotpipe;

struct GraphSet {
  std::vector<const Graph*> graphs;
  std::size_t nodes = 0;
  void add(const Graph& g) {
    graphs.push_back(&g);
    nodes += g.num_nodes();
  }
};

}  // namespace

int main(int argc, char** argv) {
  int repeats = 5;
  std::string only;  // one step's name (its first word), or all
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::string(argv[i]) == "--repeats") repeats = std::max(1, std::atoi(argv[i + 1]));
    if (std::string(argv[i]) == "--only") only = argv[i + 1];
  }
  auto step = [&](std::string_view name, const std::function<void()>& body) {
    return only.empty() || name.starts_with(only) ? bench::median_ms(body, repeats) : 0.0;
  };

  // Compile the corpus once (no cache) and keep every graph the compiles made.
  cli::JobSettings settings{"", 0, false, partitioners::min_cut_rematerialization_partition(), nullptr};
  std::vector<CompileOutput> outputs;
  std::vector<std::shared_ptr<const Graph>> programs;
  for (const cli::GraphFile& file :
       cli::collect_graph_files({AOTPIPE_EXAMPLES_DIR}, {cli::kGraphExtension, cli::kExportExtension})) {
    cli::GraphRow row;
    cli::PreparedGraph p = cli::prepare(file, settings, row);
    if (!p.job) continue;
    outputs.push_back(compile(p.job->name, p.job->fn, p.job->example_args, p.job->config, p.job->program));
    if (p.job->program) programs.push_back(p.job->program);
  }
  GraphSet all, program_set;
  for (const auto& g : programs) program_set.add(*g);
  for (const CompileOutput& out : outputs) {
    const CompileState& s = *out.state();
    if (s.traced.joint) all.add(s.traced.joint->graph);
    if (s.partition) {
      all.add(s.partition->forward);
      all.add(s.partition->backward);
    }
    if (s.traced.inference_graph) all.add(*s.traced.inference_graph);
  }
  std::vector<std::string> texts;
  for (const Graph* g : all.graphs) texts.push_back(print_graph(*g));

  VerifyOptions artifact_checks;  // as deserialize_artifact verifies a graph it read
  artifact_checks.require_tensor_meta = false;
  artifact_checks.allow_dead_code = true;
  artifact_checks.require_bound_constants = false;  // constants are bound after parsing there

  struct Row {
    std::string what;
    double ms;
    std::size_t nodes;
  };
  const std::vector<Row> rows = {
      {"print (a store)",
       step("print",
            [&] {
              for (const Graph* g : all.graphs) (void)print_graph(*g);
            }),
       all.nodes},
      {"parse (a hit)",
       step("parse",
            [&] {
              for (const std::string& t : texts) (void)parse_graph(t);
            }),
       all.nodes},
      {"verify (a hit)",
       step("verify",
            [&] {
              for (const Graph* g : all.graphs) verify(*g, artifact_checks);
            }),
       all.nodes},
      {"copy",
       step("copy",
            [&] {
              for (const Graph* g : all.graphs) (void)Graph(*g);
            }),
       all.nodes},
      {"canonical text (every lookup)",
       step("canonical",
            [&] {
              for (const Graph* g : program_set.graphs) (void)canonical_graph_text(*g);
            }),
       program_set.nodes},
  };
  fmt::print("{} compiled graphs ({} nodes) and {} programs ({} nodes) of examples/, one thread, median of {} runs\n",
             all.graphs.size(), all.nodes, program_set.graphs.size(), program_set.nodes, repeats);
  fmt::print("  {:<32} {:>10} {:>12}\n", "step", "total ms", "us / node");
  for (const Row& r : rows)
    fmt::print("  {:<32} {:>10.2f} {:>12.3f}\n", r.what, r.ms, 1000.0 * r.ms / static_cast<double>(r.nodes));
}
