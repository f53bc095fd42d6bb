#include "aotpipe/shards.h"
#include "aotpipe/work_chunks.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <map>
#include <set>
#include <numeric>
#include <stdexcept>
#include <system_error>
#include <unistd.h>

namespace aotpipe::cli {

namespace fs = std::filesystem;

namespace {

constexpr int kManifestVersion = 1;

std::size_t parse_count(std::string_view text, std::string_view whole) {
  std::size_t value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || text.empty())
    throw std::invalid_argument(
        fmt::format("--shard '{}': '{}' is not a number (expected K/N, e.g. 0/8)", whole, text));
  return value;
}

}  // namespace

ShardSpec parse_shard(std::string_view text) {
  const std::size_t slash = text.find('/');
  if (slash == std::string_view::npos)
    throw std::invalid_argument(fmt::format("--shard '{}': expected K/N, e.g. 0/8", text));
  ShardSpec spec{parse_count(text.substr(0, slash), text), parse_count(text.substr(slash + 1), text)};
  if (spec.count == 0) throw std::invalid_argument(fmt::format("--shard '{}': N must be at least 1", text));
  if (spec.index >= spec.count)
    throw std::invalid_argument(
        fmt::format("--shard '{}': K must be below N (shards are numbered 0 to {})", text, spec.count - 1));
  return spec;
}

std::vector<std::size_t> assign_shards(const std::vector<GraphFile>& files, std::size_t count) {
  const std::vector<uintmax_t> cost = estimated_costs(files);
  std::vector<uintmax_t> load(count, 0);
  std::vector<std::size_t> shard_of(files.size(), 0);
  for (std::size_t i : largest_first(files, cost)) {
    const std::size_t s = static_cast<std::size_t>(std::min_element(load.begin(), load.end()) - load.begin());
    shard_of[i] = s;
    load[s] += std::max<uintmax_t>(cost[i], 1);  // empty files still count, so they spread
  }
  return shard_of;
}

std::string batch_id(const std::vector<GraphFile>& files, std::size_t count) {
  uint64_t hash = 1469598103934665603ull;  // FNV-1a: the same on every machine and build
  auto mix = [&](std::string_view bytes) {
    for (unsigned char c : bytes) hash = (hash ^ c) * 1099511628211ull;
    hash = (hash ^ 0xff) * 1099511628211ull;  // separator
  };
  for (const GraphFile& f : files) mix(f.path.string());
  mix(std::to_string(count));
  return fmt::format("{:016x}", hash);
}

fs::path default_manifest_path(const fs::path& out_dir, const ShardSpec& shard) {
  return out_dir / "shards" / fmt::format("shard-{}-of-{}.json", shard.index, shard.count);
}

std::string manifest_json(const ShardManifest& m) {
  nlohmann::json j = {{"aotpipe_shard_manifest", kManifestVersion},
                      {"shard", m.shard.index},
                      {"num_shards", m.shard.count},
                      {"batch_id", m.batch_id},
                      {"batch_files", m.batch_files},
                      {"stages", m.stages},
                      {"batch_indices", m.batch_indices},
                      {"wall_seconds", m.wall_seconds},
                      {"threads", m.threads},
                      {"host", m.host},
                      {"rows", nlohmann::json::array()}};
  for (const GraphRow& row : m.rows) j["rows"].push_back(to_json(row));
  return j.dump(1);
}

void write_manifest(const fs::path& path, const ShardManifest& m) {
  std::error_code ec;
  if (path.has_parent_path()) fs::create_directories(path.parent_path(), ec);
  if (ec) throw std::runtime_error(fmt::format("cannot create {}: {}", path.parent_path().string(), ec.message()));
  const fs::path tmp = path.string() + fmt::format(".tmp.{}", ::getpid());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << manifest_json(m) << '\n';
    out.flush();
    if (!out) throw std::runtime_error(fmt::format("cannot write {}", tmp.string()));
  }
  fs::rename(tmp, path, ec);
  if (ec) {
    std::remove(tmp.c_str());
    throw std::runtime_error(fmt::format("cannot write {}: {}", path.string(), ec.message()));
  }
}

MergedBatch merge_manifests(const std::vector<std::pair<std::string, ShardManifest>>& manifests,
                            std::string_view unit) {
  if (manifests.empty()) throw std::runtime_error("no manifest given");
  const auto& [first_name, first] = manifests.front();
  std::map<std::size_t, const ShardManifest*> by_index;
  for (const auto& [name, m] : manifests) {
    if (m.batch_id != first.batch_id || m.shard.count != first.shard.count)
      throw std::runtime_error(fmt::format(
          "{} is {} {}/{} of batch {}, but {} is {} {}/{} of batch {}: manifests of different batches (other "
          "inputs or another N) cannot be merged",
          name, unit, m.shard.index, m.shard.count, m.batch_id, first_name, unit, first.shard.index, first.shard.count,
          first.batch_id));
    by_index[m.shard.index] = &m;  // a later manifest of the same shard replaces the earlier
  }
  MergedBatch merged;
  merged.stages = first.stages;
  merged.batch_files = first.batch_files;
  merged.num_shards = first.shard.count;
  merged.shards_present = by_index.size();
  std::vector<std::pair<std::size_t, GraphRow>> indexed;
  std::set<std::string> hosts;
  for (const auto& [index, m] : by_index) {
    for (std::size_t i = 0; i < m->rows.size(); ++i) {
      GraphRow row = m->rows[i];
      if (row.origin.empty()) row.origin = fmt::format("{} {} on {}", unit, index, m->host);
      indexed.emplace_back(m->batch_indices[i], std::move(row));
    }
    merged.wall_seconds = std::max(merged.wall_seconds, m->wall_seconds);  // the shards ran side by side
    merged.threads += m->threads;
    hosts.insert(m->host);
  }
  merged.hosts = hosts.size();
  std::stable_sort(indexed.begin(), indexed.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  for (auto& [index, row] : indexed) merged.rows.push_back(std::move(row));
  for (std::size_t k = 0; k < merged.num_shards; ++k)
    if (!by_index.count(k)) merged.missing.push_back(k);
  return merged;
}

ShardManifest read_manifest(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error(fmt::format("{}: cannot open", path.string()));
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return parse_manifest(text, path.string());
}

ShardManifest parse_manifest(const std::string& text, const std::string& where) {
  try {
    const CheckedJson j = CheckedJson::parse(text);
    if (!j.contains("aotpipe_shard_manifest"))
      throw std::runtime_error("not a shard manifest of aotpipe compile --shard");
    if (j.at("aotpipe_shard_manifest").get<int>() != kManifestVersion)
      throw std::runtime_error(fmt::format("manifest version {} (this aotpipe reads {})",
                                           j.at("aotpipe_shard_manifest").get<int>(), kManifestVersion));
    ShardManifest m;
    m.shard = {j.at("shard").get<std::size_t>(), j.at("num_shards").get<std::size_t>()};
    m.batch_id = j.at("batch_id").get<std::string>();
    m.batch_files = j.at("batch_files").get<std::size_t>();
    m.stages = j.at("stages").get<std::vector<std::string>>();
    m.batch_indices = j.at("batch_indices").get<std::vector<std::size_t>>();
    m.wall_seconds = j.at("wall_seconds").get<double>();
    m.threads = j.at("threads").get<std::size_t>();
    m.host = j.at("host").get<std::string>();
    for (const CheckedJson& row : j.at("rows")) m.rows.push_back(graph_row_from_json(row));
    if (m.rows.size() != m.batch_indices.size()) throw std::runtime_error("rows and batch_indices differ in length");
    if (m.shard.index >= m.shard.count) throw std::runtime_error("shard index not below the number of shards");
    return m;
  } catch (const nlohmann::json::exception& e) {
    throw std::runtime_error(fmt::format("{}: malformed manifest: {}", where, e.what()));
  } catch (const std::runtime_error& e) {
    const std::string what = e.what();
    if (what.rfind(where, 0) == 0) throw;
    throw std::runtime_error(fmt::format("{}: {}", where, what));
  }
}

}  // namespace aotpipe::cli
