// aotpipe cache stats [--cache-dir DIR]
// aotpipe cache clear [--cache-dir DIR]
// aotpipe cache explain INPUT... [--cache-dir DIR] [--pipeline SPEC] [--partitioner P] [--seed N]
//                                [--device D] [--no-cpu-fallback]
//
// The compile cache of `aotpipe compile` (cache/compile_cache.h): its size, emptying it, and
// for each graph the ingredients of its key (to debug a miss: compare two graphs' explanations),
// the key and whether an entry exists. explain takes compile's options, as they change the key.
#include "aotpipe/commands.h"
#include "aotpipe/compile_jobs.h"
#include "aotpipe/cuda_plugin.h"

#include <aotpipe/stages/compile_stages.h>

#include <fmt/format.h>

#include <memory>
#include <string>
#include <vector>

namespace aotpipe::cli {
namespace {

struct CacheOptions {
  std::string cache_dir;
  std::vector<std::string> inputs;
  std::string pipeline = default_compile_pipeline_text();
  std::string partitioner = "auto";
  uint64_t seed = 0;
  std::string device;
  bool no_cpu_fallback = false;
};

int run_stats(const CacheOptions& options) {
  const CompileCacheStats stats = open_compile_cache(options.cache_dir)->stats();
  fmt::print("directory        {}\n", stats.directory.string());
  fmt::print("entries          {}\n", stats.entries);
  fmt::print("records          {}\n", stats.records);
  fmt::print("size             {:.1f} MiB of {:.0f} MiB\n", static_cast<double>(stats.bytes) / 1048576.0,
             static_cast<double>(stats.max_bytes) / 1048576.0);
  fmt::print("temporary files  {}\n", stats.temporary_files);
  return 0;
}

int run_clear(const CacheOptions& options) {
  auto cache = open_compile_cache(options.cache_dir);
  const CompileCacheStats before = cache->stats();
  cache->clear();
  fmt::print("removed {} entries and {} records from {}\n", before.entries, before.records,
             cache->directory().string());
  return 0;
}

int run_explain(const CacheOptions& options) {
  auto cache = open_compile_cache(options.cache_dir);
  // The key holds the pipeline as the compile sees it (normalized by parsing).
  const std::string pipeline = compile_stage_registry().parse(options.pipeline, "aot").to_string();
  JobSettings settings{
      options.device, options.seed, options.no_cpu_fallback, partitioner_option(options.partitioner), cache, {}};
  int status = 0;
  for (const GraphFile& file : collect_graph_files(options.inputs, {kGraphExtension, kExportExtension})) {
    GraphRow row;
    PreparedGraph prepared = prepare(file, settings, row);
    fmt::print("{} ({})\n", file.path.string(), row.name);
    if (!prepared.job) {
      fmt::print("  cannot be compiled ({}): {}\n\n", row.failed_stage, row.message);
      status = 1;
      continue;
    }
    const CompileJob& job = *prepared.job;
    const CacheKeyOrBypass key = make_cache_key(job.program.get(), job.fn, job.example_args, job.config, pipeline);
    if (!key.key) {
      fmt::print("  not cached: {}\n\n", key.bypass_reason);
      continue;
    }
    for (const auto& [name, value] : key.key->ingredients) fmt::print("  {:<31} {}\n", name, value);
    fmt::print("  {:<31} {}\n", "key", key.key->digest);
    const auto path = cache->entry_path(key.key->digest);
    fmt::print("  {:<31} {}{}\n\n", "entry", path.string(), std::filesystem::exists(path) ? "" : " (absent)");
  }
  return status;
}

}  // namespace

Command add_cache_command(CLI::App& parent) {
  auto options = std::make_shared<CacheOptions>();
  CLI::App* app = parent.add_subcommand("cache", "Inspect or empty the compile cache; explain a graph's cache key");
  app->require_subcommand(1);
  auto add_dir = [&](CLI::App* sub) {
    sub->add_option("--cache-dir", options->cache_dir,
                    fmt::format("The cache's folder (default: {})", CompileCache::default_directory().string()));
  };
  CLI::App* stats = app->add_subcommand("stats", "Entries, size and bound of the cache");
  CLI::App* clear = app->add_subcommand("clear", "Remove every entry and record");
  CLI::App* explain = app->add_subcommand("explain", "Print each graph's key ingredients, key and entry");
  for (CLI::App* sub : {stats, clear, explain}) add_dir(sub);
  explain->add_option("inputs", options->inputs, "Graph files (.aotg), archives (.pt2) or directories")->required();
  explain->add_option("--pipeline", options->pipeline, "As for aotpipe compile")->capture_default_str();
  explain->add_option("--partitioner", options->partitioner, "As for aotpipe compile")
      ->check(CLI::IsMember(partitioner_names()))
      ->capture_default_str();
  explain->add_option("--seed", options->seed, "As for aotpipe compile")->capture_default_str();
  explain->add_option("--device", options->device, "As for aotpipe compile");
  explain->add_flag("--no-cpu-fallback", options->no_cpu_fallback, "As for aotpipe compile");
  return {app,
          [options, stats, clear] {
            if (stats->parsed()) return run_stats(*options);
            if (clear->parsed()) return run_clear(*options);
            return run_explain(*options);
          },
          [options] { return names_cuda(options->device); }};
}

}  // namespace aotpipe::cli
