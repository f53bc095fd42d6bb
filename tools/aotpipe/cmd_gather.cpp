// aotpipe gather MANIFEST|DIR...: the one report of a batch compiled in shards.
//
// Reads the manifests `aotpipe compile --shard K/N` wrote (a directory stands for the
// shard-*-of-*.json files below it), checks they belong to one batch, and prints the table,
// summary and failures of the whole batch in batch order, as one `aotpipe compile` would. Shards
// without a manifest are named, with the option that recompiles them. Exit status 0 when every
// shard is present and every graph compiled; 1 otherwise; 2 for manifests that cannot be merged.
#include "aotpipe/batch_report.h"
#include "aotpipe/commands.h"
#include "aotpipe/shards.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <map>
#include <memory>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

namespace aotpipe::cli {
namespace {

namespace fs = std::filesystem;

std::vector<fs::path> manifest_files(const std::vector<std::string>& paths) {
  std::vector<fs::path> files;
  for (const std::string& arg : paths) {
    std::error_code ec;
    if (!fs::is_directory(arg, ec)) {
      files.emplace_back(arg);
      continue;
    }
    std::vector<fs::path> found;
    for (fs::recursive_directory_iterator it(arg, ec); !ec && it != fs::recursive_directory_iterator();
         it.increment(ec)) {
      const std::string name = it->path().filename().string();
      if (name.rfind("shard-", 0) == 0 && name.ends_with(".json") && !it->is_directory()) found.push_back(it->path());
    }
    if (found.empty()) throw std::runtime_error(fmt::format("{}: no shard-*-of-*.json manifests", arg));
    std::sort(found.begin(), found.end());
    files.insert(files.end(), found.begin(), found.end());
  }
  return files;
}

int run_gather(const std::vector<std::string>& paths) {
  std::vector<std::pair<std::string, ShardManifest>> manifests;
  for (const fs::path& path : manifest_files(paths)) {
    ShardManifest m = read_manifest(path);
    for (const auto& [name, earlier] : manifests)
      if (earlier.shard.index == m.shard.index && earlier.batch_id == m.batch_id)
        spdlog::warn("shard {} has two manifests ({} and {}); using the latter", m.shard.index, name, path.string());
    manifests.emplace_back(path.string(), std::move(m));
  }
  const MergedBatch batch = merge_manifests(manifests);
  print_table(batch.rows, batch.stages);
  print_summary(
      batch.rows, batch.wall_seconds,
      fmt::format("{} of {} shards on {} host{}, {} worker threads in all; wall s: the slowest shard",
                  batch.shards_present, batch.num_shards, batch.hosts, batch.hosts == 1 ? "" : "s", batch.threads));
  if (!batch.missing.empty()) {
    fmt::print(
        "\nMissing shards: {} of {} ({} of the batch's {} graph files not reported); resubmit each with "
        "`aotpipe compile <the same inputs> --shard K/{}`\n",
        fmt::join(batch.missing, ", "), batch.num_shards, batch.batch_files - batch.rows.size(), batch.batch_files,
        batch.num_shards);
    return 1;
  }
  if (batch.rows.size() != batch.batch_files)
    throw std::runtime_error(
        fmt::format("the manifests report {} graph files, the batch has {}", batch.rows.size(), batch.batch_files));
  return std::all_of(batch.rows.begin(), batch.rows.end(), [](const GraphRow& r) { return r.ok(); }) ? 0 : 1;
}

}  // namespace

Command add_gather_command(CLI::App& parent) {
  auto paths = std::make_shared<std::vector<std::string>>();
  CLI::App* app = parent.add_subcommand(
      "gather",
      "Merge the manifests of a batch compiled with `aotpipe compile --shard K/N` into one report, naming "
      "the shards that are missing");
  app->add_option("manifests", *paths, "Manifest files, or directories searched recursively for shard-*-of-*.json")
      ->required();
  return {app, [paths] {
            try {
              return run_gather(*paths);
            } catch (const std::exception& e) {
              fmt::print(stderr, "aotpipe gather: {}\n", e.what());
              return 2;
            }
          }};
}

}  // namespace aotpipe::cli
