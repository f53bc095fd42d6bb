#include "aotpipe/shards.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <fstream>
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
    throw std::invalid_argument(fmt::format("--shard '{}': '{}' is not a number (expected K/N, e.g. 0/8)", whole, text));
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
  std::vector<uintmax_t> cost(files.size(), 0);
  for (std::size_t i = 0; i < files.size(); ++i) {
    std::error_code ec;
    const uintmax_t size = fs::file_size(files[i].path, ec);
    cost[i] = ec ? 0 : size;
  }
  std::vector<std::size_t> order(files.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    if (cost[a] != cost[b]) return cost[a] > cost[b];
    return files[a].path < files[b].path;
  });
  std::vector<uintmax_t> load(count, 0);
  std::vector<std::size_t> shard_of(files.size(), 0);
  for (std::size_t i : order) {
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

void write_manifest(const fs::path& path, const ShardManifest& m) {
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
  std::error_code ec;
  if (path.has_parent_path()) fs::create_directories(path.parent_path(), ec);
  if (ec) throw std::runtime_error(fmt::format("cannot create {}: {}", path.parent_path().string(), ec.message()));
  const fs::path tmp = path.string() + fmt::format(".tmp.{}", ::getpid());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << j.dump(1) << '\n';
    out.flush();
    if (!out) throw std::runtime_error(fmt::format("cannot write {}", tmp.string()));
  }
  fs::rename(tmp, path, ec);
  if (ec) {
    std::remove(tmp.c_str());
    throw std::runtime_error(fmt::format("cannot write {}: {}", path.string(), ec.message()));
  }
}

ShardManifest read_manifest(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error(fmt::format("{}: cannot open", path.string()));
  try {
    const nlohmann::json j = nlohmann::json::parse(in);
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
    for (const nlohmann::json& row : j.at("rows")) m.rows.push_back(graph_row_from_json(row));
    if (m.rows.size() != m.batch_indices.size()) throw std::runtime_error("rows and batch_indices differ in length");
    if (m.shard.index >= m.shard.count) throw std::runtime_error("shard index not below the number of shards");
    return m;
  } catch (const nlohmann::json::exception& e) {
    throw std::runtime_error(fmt::format("{}: malformed manifest: {}", path.string(), e.what()));
  } catch (const std::runtime_error& e) {
    const std::string what = e.what();
    if (what.rfind(path.string(), 0) == 0) throw;
    throw std::runtime_error(fmt::format("{}: {}", path.string(), what));
  }
}

}  // namespace aotpipe::cli
