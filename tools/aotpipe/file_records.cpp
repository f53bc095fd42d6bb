#include "aotpipe/file_records.h"
#include "aotpipe/graph_files.h"

#include <aotpipe/cache/cache_key.h>
#include <aotpipe/export/exported_program.h>

#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <exception>
#include <utility>

namespace aotpipe::cli {
namespace {

// The accelerators this process has. A graph's constants on a device the process lacks are
// bound as data-less examples, and keyed so: the same file and options key differently on a
// machine (or under CUDA_VISIBLE_DEVICES) with the device, and must not share a record.
std::string devices_here() {
  std::string out;
  for (const c10::DeviceType type : {c10::DeviceType::CUDA, c10::DeviceType::HIP, c10::DeviceType::XPU,
                                     c10::DeviceType::MPS, c10::DeviceType::PrivateUse1}) {
    const int count = c10::impl::hasDeviceGuardImpl(type) ? c10::impl::getDeviceGuardImpl(type)->deviceCount() : 0;
    fmt::format_to(std::back_inserter(out), "{}{}={}", out.empty() ? "" : " ", c10::DeviceTypeName(type, true), count);
  }
  return out;
}

}  // namespace

std::unique_ptr<FileRecords> FileRecords::open(const JobSettings& settings, std::string_view pipeline_text) {
  if (!settings.cache) return nullptr;
  AotConfig config = job_config(settings);
  ConfigIngredients configured = config_key_ingredients(config, pipeline_text);
  if (!configured.ok()) return nullptr;
  std::vector<std::pair<std::string, std::string>> ingredients = {
      {"record", "aotpipe compile: a graph file"},
      {"seed", std::to_string(settings.seed)},
      {"device", settings.device},
      {"grad_mode", grad_mode_ingredient()},
      {"devices", devices_here()},
  };
  std::move(configured.ingredients.begin(), configured.ingredients.end(), std::back_inserter(ingredients));
  return std::unique_ptr<FileRecords>(
      new FileRecords(settings.cache, std::move(config), cache_key_digest(ingredients)));
}

FileRecords::FileRecords(std::shared_ptr<CompileCache> cache, AotConfig config, std::string options_digest)
    : cache_(std::move(cache)), config_(std::move(config)), options_digest_(std::move(options_digest)) {}

std::optional<std::string> FileRecords::digest_of(const std::filesystem::path& file) const {
  std::string bytes;
  try {
    // A .pt2 archive's weights cannot change a compile on metadata examples: not read.
    bytes = file.extension() == ".pt2" ? archive_compile_ingredients(file) : read_text_file(file);
  } catch (const std::exception&) { return std::nullopt; }
  // The extension too: it decides how the bytes are read (.aotg text or a .pt2 archive).
  return cache_key_digest(
      {{"options", options_digest_}, {"extension", file.extension().string()}, {"bytes", content_hash_hex(bytes)}});
}

namespace {

bool is_digest(const std::string& text) {
  return text.size() == 32 && text.find_first_not_of("0123456789abcdef") == std::string::npos;
}

}  // namespace

FileRecord parse_file_record(std::string_view payload) {
  const CheckedJson json = CheckedJson::parse(payload);
  FileRecord record;
  record.entry = json.at("entry").get<std::string>();
  if (!is_digest(record.entry)) throw std::invalid_argument("its entry is not a key: '" + record.entry + "'");
  record.row = graph_row_from_json(json.at("row"));
  if (!record.row.ok() || !record.row.summary) throw std::invalid_argument("its row is not a compiled graph's");
  return record;
}

std::optional<FileRecords::Hit> FileRecords::load(const std::string& digest) const {
  std::optional<std::string> payload = cache_->load_record(digest);
  if (!payload) return std::nullopt;
  Hit hit;
  std::string entry;
  try {
    FileRecord record = parse_file_record(*payload);
    entry = std::move(record.entry);
    hit.row = std::move(record.row);
  } catch (const std::exception& e) {
    cache_->reject_record(digest, e.what());
    return std::nullopt;
  }
  CacheKey key;
  key.digest = std::move(entry);
  hit.artifact = cache_->load(key);  // checked as any hit's; gone or unusable: a miss
  if (!hit.artifact) return std::nullopt;
  return hit;
}

void FileRecords::store(const std::filesystem::path& file, const std::string& digest, std::string_view entry_key,
                        const GraphRow& row) const {
  // The compile read the file again after its digest was taken: if the file changed meanwhile,
  // the digest is of other bytes than the compile's, and the record would send them to it.
  if (digest_of(file) != digest) return;
  GraphRow kept = row;  // what is the same in every run: not the file, the name, the times
  kept.file.clear();
  kept.name.clear();
  kept.stage_ms.clear();
  kept.total_ms = 0;
  kept.cache.clear();
  kept.origin.clear();
  try {
    const nlohmann::json record = {{"entry", entry_key}, {"row", to_json(kept)}};
    cache_->store_record(digest, record.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
  } catch (const std::exception& e) {  // a record is an optimization: never a failure
    cache_->warn(fmt::format("compile cache: could not store the record of {} ({})", file.string(), e.what()));
  }
}

}  // namespace aotpipe::cli
