// Cold vs warm compiles through the compile cache, in one run, printed as tables:
//   corpus:       every graph of examples/ (as `aotpipe compile` prepares them), compiled on one
//                 thread: without a cache, cold into an empty cache (miss + store), warm (hit);
//                 the warm compile split into its phases (key, load, post_compile);
//   aot_function: the first call of a fresh CompiledFunction (compile + run) of the synthetic
//                 program, without a cache, cold and warm.
// Medians over --repeats runs (default 5). Run: build/bench/runtime/compile_cache_bench
#include "aotpipe/compile_jobs.h"
#include "synthetic_program.h"

#include <aotpipe/driver/aot_function.h>
#include <aotpipe/cache/cache_key.h>
#include <aotpipe/cache/compile_cache.h>
#include <aotpipe/stages/compile_stages.h>
#include <aotpipe/runtime/post_compile.h>
#include <aotpipe/stages/partition/min_cut_partition.h>

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include <stdlib.h>

namespace {

namespace fs = std::filesystem;
using namespace aotpipe;
using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

fs::path fresh_dir() {
  std::string pattern = (fs::temp_directory_path() / "aotpipe-cache-bench-XXXXXX").string();
  return ::mkdtemp(pattern.data());
}

std::shared_ptr<CompileCache> cache_in(const fs::path& dir) {
  CompileCacheOptions options;
  options.directory = dir;
  return std::make_shared<CompileCache>(std::move(options));
}

struct Corpus {
  std::vector<cli::PreparedGraph> prepared;
  std::vector<CompileJob> jobs(std::shared_ptr<CompileCache> cache) const {
    std::vector<CompileJob> out;
    for (const cli::PreparedGraph& p : prepared) {
      out.push_back(*p.job);
      out.back().cache = cache;
    }
    return out;
  }
};

Corpus load_corpus(const fs::path& examples) {
  Corpus corpus;
  cli::JobSettings settings{"", 0, false, partitioners::min_cut_rematerialization_partition(), nullptr};
  for (const cli::GraphFile& file :
       cli::collect_graph_files({examples.string()}, {cli::kGraphExtension, cli::kExportExtension})) {
    cli::GraphRow row;
    cli::PreparedGraph p = cli::prepare(file, settings, row);
    if (p.job) corpus.prepared.push_back(std::move(p));
  }
  return corpus;
}

double compile_all(const std::vector<CompileJob>& jobs) {
  const auto start = Clock::now();
  for (const CompileJob& job : jobs)
    (void)compile(job.name, job.fn, job.example_args, job.config, job.program, job.cache);
  return ms_since(start);
}

struct Phases {
  double key = 0, load = 0, post_compile = 0;
};

// The warm path by hand, phase by phase (what compile_async does on a hit).
Phases warm_phases(const std::vector<CompileJob>& jobs, CompileCache& cache) {
  Phases p;
  const std::string pipeline = default_compile_pipeline().to_string();
  for (const CompileJob& job : jobs) {
    auto start = Clock::now();
    const CacheKeyOrBypass key = make_cache_key(job.program.get(), job.fn, job.example_args, job.config, pipeline);
    p.key += ms_since(start);
    start = Clock::now();
    std::shared_ptr<const CompiledArtifact> artifact = cache.load(*key.key);
    p.load += ms_since(start);
    if (!artifact) throw std::runtime_error(job.name + ": not in the cache");
    start = Clock::now();
    (void)post_compile(artifact, compile_on_first_call(artifact, job.config));
    p.post_compile += ms_since(start);
  }
  return p;
}

double first_call(const Function& program, const TensorList& inputs, std::shared_ptr<CompileCache> cache) {
  const auto start = Clock::now();
  const CompiledFunction f = aot_function(program, {}, std::move(cache));
  (void)f(inputs);
  return ms_since(start);
}

}  // namespace

int main(int argc, char** argv) {
  int repeats = 5;
  for (int i = 1; i + 1 < argc; ++i)
    if (std::string(argv[i]) == "--repeats") repeats = std::atoi(argv[i + 1]);
  const Corpus corpus = load_corpus(AOTPIPE_EXAMPLES_DIR);
  const std::size_t n = corpus.prepared.size();

  std::vector<double> none, cold, warm, key, load, post;
  for (int r = 0; r < repeats; ++r) {
    const fs::path dir = fresh_dir();
    auto cache = cache_in(dir);
    none.push_back(compile_all(corpus.jobs(nullptr)));
    cold.push_back(compile_all(corpus.jobs(cache)));
    warm.push_back(compile_all(corpus.jobs(cache_in(dir))));  // a new cache object: as a new process
    const Phases phases = warm_phases(corpus.jobs(nullptr), *cache_in(dir));
    key.push_back(phases.key);
    load.push_back(phases.load);
    post.push_back(phases.post_compile);
    cache->clear();
    ::rmdir(dir.c_str());
  }
  fmt::print("corpus: {} graphs of examples/, one thread, median of {} runs\n", n, repeats);
  fmt::print("  {:<34} {:>10} {:>12} {:>10}\n", "compile", "total ms", "ms / graph", "vs none");
  auto row = [&](const char* what, double ms) {
    fmt::print("  {:<34} {:>10.1f} {:>12.3f} {:>9.2f}x\n", what, ms, ms / n, median(none) / ms);
  };
  row("no cache", median(none));
  row("cold (miss + store)", median(cold));
  row("warm (hit)", median(warm));
  fmt::print("  warm phases: key {:.1f} ms, load {:.1f} ms, post_compile {:.1f} ms\n", median(key), median(load),
             median(post));
  fmt::print("  warm vs cold: {:.1f}x faster\n\n", median(cold) / median(warm));

  fmt::print("aot_function first call (compile + run), synthetic program, median of {} runs\n", repeats);
  fmt::print("  {:>6} {:>12} {:>12} {:>12} {:>14}\n", "ops", "no cache ms", "cold ms", "warm ms", "cold / warm");
  for (int ops : {10, 100, 1000}) {
    const Function program = bench::synthetic_program(ops);
    const TensorList inputs = bench::synthetic_inputs();
    std::vector<double> f_none, f_cold, f_warm;
    for (int r = 0; r < repeats; ++r) {
      const fs::path dir = fresh_dir();
      f_none.push_back(first_call(program, inputs, nullptr));
      f_cold.push_back(first_call(program, inputs, cache_in(dir)));
      f_warm.push_back(first_call(program, inputs, cache_in(dir)));
      cache_in(dir)->clear();
      ::rmdir(dir.c_str());
    }
    fmt::print("  {:>6} {:>12.2f} {:>12.2f} {:>12.2f} {:>13.1f}x\n", ops, median(f_none), median(f_cold),
               median(f_warm), median(f_cold) / median(f_warm));
  }
  return 0;
}
