#include <aotpipe/export/exported_program.h>
#include <aotpipe/export/internal/pt2_archive.h>
#include <aotpipe/export/internal/torch_save_reader.h>
#include <aotpipe/graph/error_text.h>
#include <aotpipe/graph/layout_bounds.h>

#include <ATen/ops/empty.h>
#include <ATen/ops/empty_strided.h>
#include <caffe2/serialize/inline_container.h>
#include <c10/util/Exception.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <array>

namespace aotpipe::pt2 {
namespace {

// What the archive spec of torch 2.11 says (torch/csrc/export/pt2_archive_constants.h).
constexpr const char* kArchiveFormatRecord = "archive_format";
constexpr const char* kArchiveFormat = "pt2";
constexpr const char* kArchiveVersionRecord = "archive_version";
constexpr const char* kArchiveVersion = "0";
constexpr int kSchemaMajor = 8;  // torch/_export/serde/schema.py SCHEMA_VERSION = (8, 17)
constexpr int kSchemaMinor = 17;

std::string first_line(std::string_view text) { return std::string(text.substr(0, text.find('\n'))); }

// Adds the tensors of an unpickled value to `out` in pytree order; false on a non-tensor leaf.
bool flatten_tensors(const c10::IValue& v, std::vector<at::Tensor>& out) {
  if (v.isTensor()) {
    out.push_back(v.toTensor());
    return true;
  }
  if (v.isTuple()) {
    for (const c10::IValue& e : v.toTupleRef().elements())
      if (!flatten_tensors(e, out)) return false;
    return true;
  }
  if (v.isList()) {
    for (const c10::IValue& e : v.toListRef())
      if (!flatten_tensors(e, out)) return false;
    return true;
  }
  if (v.isGenericDict()) {
    for (const auto& entry : v.toGenericDict())
      if (!flatten_tensors(entry.value(), out)) return false;
    return true;
  }
  return v.isNone();
}

}  // namespace

Pt2Archive::Pt2Archive(const std::filesystem::path& path, bool map_weights)
    : path_(path), where_(path.string()), map_weights_(map_weights) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec))
    throw Pt2Error(fmt::format("{}: cannot read: {}", where_,
                               std::filesystem::exists(path, ec) ? "not a regular file" : "no such file"));
  file_bytes_ = std::filesystem::file_size(path, ec);
  {
    std::ifstream file(path, std::ios::binary);
    auto read_at = [&](std::uint64_t offset, std::size_t n, unsigned char* out) {
      file.clear();
      file.seekg(static_cast<std::streamoff>(offset));
      return static_cast<bool>(file.read(reinterpret_cast<char*>(out), static_cast<std::streamsize>(n)));
    };
    if (auto overclaim = zip_overclaim(file_bytes_, read_at))
      throw Pt2Error(fmt::format("{}: {}, more than an archive of {} bytes can hold", where_, *overclaim, file_bytes_));
  }
  try {
    reader_ = std::make_unique<caffe2::serialize::PyTorchStreamReader>(path.string());
  } catch (const std::exception& e) {
    throw Pt2Error(fmt::format("{}: not a readable .pt2 archive (a zip file; truncated or another format?): {}", where_,
                               first_line(error_text(e))));
  }
  if (reader_->hasRecord(kArchiveFormatRecord) && read_string(kArchiveFormatRecord) != kArchiveFormat)
    throw Pt2Error(
        fmt::format("{}: archive format '{}' is not '{}'", where_, read_string(kArchiveFormatRecord), kArchiveFormat));
  if (reader_->hasRecord(kArchiveVersionRecord)) {
    const std::string version = read_string(kArchiveVersionRecord);
    if (version != kArchiveVersion)
      throw Pt2Error(fmt::format("{}: archive version {} is not supported; this build reads version {} (torch 2.11)",
                                 where_, version, kArchiveVersion));
  }
  std::vector<std::string> models;
  for (const std::string& record : reader_->getAllRecords())
    if (record.rfind("models/", 0) == 0 && record.size() > 12 && record.ends_with(".json") &&
        record.find('/', 7) == std::string::npos)
      models.push_back(record.substr(7, record.size() - 12));
  if (models.empty())
    throw Pt2Error(
        fmt::format("{}: no models/<name>.json: not a torch.export archive (a TorchScript or torch.save "
                    "file, or an AOTInductor package?)",
                    where_));
  if (models.size() > 1 && std::find(models.begin(), models.end(), "model") == models.end())
    throw Pt2Error(fmt::format("{}: the archive holds {} models ({}); only single-model archives are supported", where_,
                               models.size(), fmt::join(models, ", ")));
  model_name_ = models.size() == 1 ? models.front() : "model";
  const std::string weights_config = fmt::format("data/weights/{}_weights_config.json", model_name_);
  const std::string constants_config = fmt::format("data/constants/{}_constants_config.json", model_name_);
  if (reader_->hasRecord(weights_config)) weights_ = read_json(weights_config).at("config");
  if (reader_->hasRecord(constants_config)) constants_ = read_json(constants_config).at("config");
}

Pt2Archive::~Pt2Archive() = default;

std::size_t Pt2Archive::record_size(const std::string& record) const {
  std::size_t size = 0;
  try {
    size = reader_->getRecordSize(record);
  } catch (const std::exception& e) {
    throw Pt2Error(fmt::format("{}: cannot read record '{}': {}", where_, record, first_line(error_text(e))));
  }
  if (!zip_claim_fits(size, file_bytes_))
    throw Pt2Error(fmt::format("{}: record '{}' claims {} bytes, more than an archive of {} bytes can hold", where_,
                               record, size, file_bytes_));
  return size;
}

std::string Pt2Archive::read_string(const std::string& record) const {
  (void)record_size(record);
  try {
    auto [data, size] = reader_->getRecord(record);
    return std::string(static_cast<const char*>(data.get()), size);
  } catch (const std::exception& e) {
    throw Pt2Error(fmt::format("{}: cannot read record '{}': {}", where_, record, first_line(error_text(e))));
  }
}

Json Pt2Archive::read_json(const std::string& record) const {
  try {
    return Json::parse(read_string(record));
  } catch (const Json::exception& e) {
    throw Pt2Error(fmt::format("{}: record '{}' is not valid JSON: {}", where_, record, e.what()));
  }
}

Json Pt2Archive::model_json() const {
  Json model = read_json(fmt::format("models/{}.json", model_name_));
  try {
    const Json& version = model.at("schema_version");
    const int major = version.at("major").get<int>();
    const int minor = version.at("minor").get<int>();
    if (major != kSchemaMajor)
      throw Pt2Error(
          fmt::format("{}: schema version {}.{} is not supported; this build reads schema {}.x (written by "
                      "torch 2.11, {}.{})",
                      where_, major, minor, kSchemaMajor, kSchemaMajor, kSchemaMinor));
  } catch (const Json::exception& e) {
    throw Pt2Error(fmt::format("{}: models/{}.json has no valid schema_version: {}", where_, model_name_, e.what()));
  }
  return model;
}

at::Tensor Pt2Archive::payload_tensor(const std::string& dir, const std::string& fqn, const Json& payload) {
  try {
    if (payload.value("use_pickle", false))
      throw Pt2Error(
          fmt::format("{}: '{}' is stored pickled (a tensor subclass or custom object), which is not "
                      "supported",
                      where_, fqn));
    const TensorMeta meta = tensor_meta_from_serde(payload.at("tensor_meta"), {});
    const std::string record = dir + payload.at("path_name").get<std::string>();
    if (!reader_->hasRecord(record))
      throw Pt2Error(fmt::format("{}: '{}' names record '{}', which the archive lacks", where_, fqn, record));
    auto it = storages_.find(record);
    if (it == storages_.end()) {
      const std::size_t bytes = record_size(record);
      const std::size_t element = c10::elementSize(meta.dtype);
      if (bytes % element != 0)
        throw Pt2Error(fmt::format("{}: record '{}' of '{}' has {} bytes, not a whole number of {} elements", where_,
                                   record, fqn, bytes, c10::toString(meta.dtype)));
      std::optional<at::Tensor> flat = mapped_record(record, bytes, meta.dtype);
      if (!flat) {
        flat = at::empty({static_cast<int64_t>(bytes / element)}, at::TensorOptions().dtype(meta.dtype));
        if (bytes) reader_->getRecord(record, flat->data_ptr(), bytes);
      }
      it = storages_.emplace(record, *flat).first;
    }
    // torch.export writes a storage once, so two names of one tensor name one record with one
    // metadata: they get one tensor (and so one leaf), not two views of one storage.
    const std::string tensor_key = record + '\n' + payload.at("tensor_meta").dump();
    if (auto same = tensors_.find(tensor_key); same != tensors_.end()) return same->second;
    at::Tensor tensor = view_of(it->second, meta, fqn, record);
    tensors_.emplace(tensor_key, tensor);
    return tensor;
  } catch (const Pt2Error&) { throw; } catch (const std::exception& e) {
    throw Pt2Error(fmt::format("{}: state tensor '{}': {}", where_, fqn, first_line(error_text(e))));
  }
}

std::optional<at::Tensor> Pt2Archive::mapped_record(const std::string& record, std::size_t bytes,
                                                    c10::ScalarType dtype) {
  if (!map_weights_ || bytes == 0) return std::nullopt;
  const std::size_t header = reader_->getRecordHeaderOffset(record);
  const std::size_t data = reader_->getRecordOffset(record);
  if (!file_) {
    try {
      file_ = MappedFile::open(path_);
    } catch (const std::exception&) {}
    headers_.open(path_, std::ios::binary);
    if (!file_ || !headers_) {
      map_weights_ = false;  // read instead (a file that cannot be mapped can still be read)
      return std::nullopt;
    }
  }
  // The zip local header: signature, then the compression method at +8 (0: stored). Read from
  // the file, not the mapping: touching the mapping would fault in (and read ahead) the pages
  // around every tensor.
  constexpr std::size_t kLocalHeaderSize = 30;
  if (header + kLocalHeaderSize > file_->size() || data + bytes > file_->size() || data < header) return std::nullopt;
  std::array<unsigned char, kLocalHeaderSize> local{};
  headers_.seekg(static_cast<std::streamoff>(header));
  if (!headers_.read(reinterpret_cast<char*>(local.data()), local.size())) return std::nullopt;
  const bool stored =
      local[0] == 'P' && local[1] == 'K' && local[2] == 3 && local[3] == 4 && local[8] == 0 && local[9] == 0;
  if (!stored) return std::nullopt;
  if (data % c10::elementSize(dtype) != 0) return std::nullopt;
  const auto numel = static_cast<int64_t>(bytes / c10::elementSize(dtype));
  return tensor_over(file_, data, {numel}, {1}, dtype);
}

at::Tensor Pt2Archive::view_of(const at::Tensor& flat, const TensorMeta& meta, const std::string& fqn,
                               const std::string& record) const {
  if (flat.numel() == 0 && meta.numel() > 0)  // the Python loader substitutes zeros too
    return at::empty_strided(meta.sizes, meta.strides, at::TensorOptions().dtype(meta.dtype)).zero_();
  const int64_t extent = storage_extent(meta);
  if (extent > flat.numel())
    throw Pt2Error(fmt::format("{}: '{}' ({}) needs {} elements of storage, record '{}' holds {}", where_, fqn,
                               to_string(meta), extent, record, flat.numel()));
  return flat.as_strided(meta.sizes, meta.strides, meta.storage_offset).detach();
}

at::Tensor Pt2Archive::state_tensor(const std::string& fqn, std::string_view what) {
  if (weights_.is_object() && weights_.contains(fqn)) return payload_tensor("data/weights/", fqn, weights_.at(fqn));
  if (constants_.is_object() && constants_.contains(fqn))
    return payload_tensor("data/constants/", fqn, constants_.at(fqn));
  throw Pt2Error(
      fmt::format("{}: {} '{}' is in the graph signature but neither the weights nor the constants of the "
                  "archive hold it",
                  where_, what, fqn));
}

std::optional<std::vector<at::Tensor>> Pt2Archive::sample_inputs(std::string& note) const {
  const std::string record = fmt::format("data/sample_inputs/{}.pt", model_name_);
  if (!reader_->hasRecord(record)) {
    note = "the archive has no sample inputs";
    return std::nullopt;
  }
  try {
    (void)record_size(record);
    auto [data, size] = reader_->getRecord(record);
    c10::IValue value = load_torch_save(data, size);
    std::vector<at::Tensor> out;
    if (!flatten_tensors(value, out)) {
      note = "the sample inputs hold values other than tensors";
      return std::nullopt;
    }
    return out;
  } catch (const std::exception& e) {
    note = fmt::format("the sample inputs could not be read: {}", first_line(error_text(e)));
    return std::nullopt;
  }
}

std::string Pt2Archive::compile_ingredients() const {
  std::vector<std::string> records = reader_->getAllRecords();
  std::sort(records.begin(), records.end());
  std::string out;
  for (const std::string& record : records) {
    const std::size_t size = reader_->getRecordSize(record);
    fmt::format_to(std::back_inserter(out), "{} {}\n", record, size);
    const bool state_data =
        (record.starts_with("data/weights/") || record.starts_with("data/constants/")) && !record.ends_with(".json");
    if (!state_data) out += read_string(record);
  }
  return out;
}

}  // namespace aotpipe::pt2
