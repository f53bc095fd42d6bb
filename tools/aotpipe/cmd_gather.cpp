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
    for (fs::recursive_directory_iterator it(arg, ec); !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
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
  std::map<std::size_t, std::pair<fs::path, ShardManifest>> shards;  // by shard index
  std::optional<ShardManifest> first;
  fs::path first_path;
  for (const fs::path& path : manifest_files(paths)) {
    ShardManifest m = read_manifest(path);
    if (!first) {
      first = m;
      first_path = path;
    } else if (m.batch_id != first->batch_id || m.shard.count != first->shard.count) {
      throw std::runtime_error(fmt::format(
          "{} is shard {}/{} of batch {}, but {} is shard {}/{} of batch {}: manifests of different batches (other "
          "inputs or another N) cannot be merged",
          path.string(), m.shard.index, m.shard.count, m.batch_id, first_path.string(), first->shard.index,
          first->shard.count, first->batch_id));
    }
    const std::size_t index = m.shard.index;
    if (auto it = shards.find(index); it != shards.end())
      spdlog::warn("shard {} has two manifests ({} and {}); using the latter", index, it->second.first.string(),
                   path.string());
    shards.insert_or_assign(index, std::make_pair(path, std::move(m)));
  }
  if (!first) throw std::runtime_error("no manifest given");

  // The rows of the whole batch, in batch order.
  std::vector<std::pair<std::size_t, GraphRow>> indexed;
  double wall = 0;
  std::size_t threads = 0;
  std::set<std::string> hosts;
  for (const auto& [index, entry] : shards) {
    const ShardManifest& m = entry.second;
    for (std::size_t i = 0; i < m.rows.size(); ++i) indexed.emplace_back(m.batch_indices[i], m.rows[i]);
    wall = std::max(wall, m.wall_seconds);  // the shards ran side by side
    threads += m.threads;
    hosts.insert(m.host);
  }
  std::sort(indexed.begin(), indexed.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<GraphRow> rows;
  for (auto& [index, row] : indexed) rows.push_back(std::move(row));

  print_table(rows, first->stages);
  print_summary(rows, wall,
                fmt::format("{} of {} shards on {} host{}, {} worker threads in all; wall s: the slowest shard",
                            shards.size(), first->shard.count, hosts.size(), hosts.size() == 1 ? "" : "s", threads));
  std::vector<std::size_t> missing;
  for (std::size_t k = 0; k < first->shard.count; ++k)
    if (!shards.count(k)) missing.push_back(k);
  if (!missing.empty()) {
    fmt::print("\nMissing shards: {} of {} ({} of the batch's {} graph files not reported); resubmit each with "
               "`aotpipe compile <the same inputs> --shard K/{}`\n",
               fmt::join(missing, ", "), first->shard.count, first->batch_files - rows.size(), first->batch_files,
               first->shard.count);
    return 1;
  }
  if (rows.size() != first->batch_files)
    throw std::runtime_error(fmt::format("the manifests report {} graph files, the batch has {}", rows.size(),
                                         first->batch_files));
  return std::all_of(rows.begin(), rows.end(), [](const GraphRow& r) { return r.ok(); }) ? 0 : 1;
}

}  // namespace

Command add_gather_command(CLI::App& parent) {
  auto paths = std::make_shared<std::vector<std::string>>();
  CLI::App* app = parent.add_subcommand(
      "gather", "Merge the manifests of a batch compiled with `aotpipe compile --shard K/N` into one report, naming "
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
