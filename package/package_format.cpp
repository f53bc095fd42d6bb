#include <aotpipe/package/package_format.h>
#include <aotpipe/graph/checked_json.h>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <fstream>

namespace aotpipe {

namespace {

using json = CheckedJson;  // numbers read exactly or refused (graph/checked_json.h)

constexpr std::array<char, 8> kMagic = {'A', 'O', 'T', 'P', 'K', 'G', '\n', '\0'};

uint64_t align_up(uint64_t n) { return (n + kPackageAlignment - 1) / kPackageAlignment * kPackageAlignment; }

uint64_t checksum_of(std::string_view bytes) { return XXH3_64bits(bytes.data(), bytes.size()); }

void put_u32(std::string& out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
void put_u64(std::string& out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
uint64_t get_le(const char* p, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v |= static_cast<uint64_t>(static_cast<unsigned char>(p[i])) << (8 * i);
  return v;
}

}  // namespace

std::string package_header(std::string_view manifest, uint32_t format_version) {
  std::string header(kMagic.begin(), kMagic.end());
  put_u32(header, format_version);
  put_u32(header, 0);
  put_u64(header, manifest.size());
  put_u64(header, checksum_of(manifest));
  return header;
}

bool reseal_manifest_checksum(std::string& bytes) {
  if (bytes.size() < kPackageHeaderSize) return false;
  const uint64_t manifest_size = get_le(bytes.data() + 16, 8);
  if (manifest_size > bytes.size() - kPackageHeaderSize) return false;
  std::string checksum;
  put_u64(checksum, checksum_of(std::string_view(bytes).substr(kPackageHeaderSize, manifest_size)));
  bytes.replace(24, 8, checksum);
  return true;
}

namespace {

// ---- manifest to JSON ------------------------------------------------------------------------

json blob_json(const PackageBlob& blob) {
  return {{"offset", blob.offset}, {"size", blob.size}, {"xxh3", fmt::format("{:016x}", blob.checksum)}};
}

json meta_json(const TensorMeta& meta) {
  return {{"dtype", dtype_short_name(meta.dtype)},
          {"sizes", meta.sizes.vec()},
          {"strides", meta.strides.vec()},
          {"device", meta.device.str()}};
}

json manifest_json(const PackageManifest& m) {
  json tensors = json::array();
  for (const PackageTensor& t : m.tensors) {
    json j = meta_json(t.meta);
    j["blob"] = blob_json(t.blob);
    tensors.push_back(std::move(j));
  }
  json state = json::array();
  for (const PackageStateEntry& s : m.state)
    state.push_back({{"kind", to_string(s.kind)},
                     {"name", s.name},
                     {"tensor", s.tensor},
                     {"requires_grad", s.requires_grad},
                     {"persistent", s.persistent}});
  json compiles = json::array();
  for (const PackageCompile& c : m.compiles) {
    json inputs = json::array();
    for (const TensorMeta& meta : c.user_inputs) inputs.push_back(meta_json(meta));
    compiles.push_back({{"grad_mode", c.grad_mode},
                        {"requires_grad", c.requires_grad},
                        {"user_inputs", std::move(inputs)},
                        {"training", c.training},
                        {"artifact", blob_json(c.artifact)}});
  }
  json built_with = {{"aotpipe", m.aotpipe_version},
                     {"aotpipe_build", m.aotpipe_build},
                     {"torch", m.torch_version},
                     {"artifact_schema", m.artifact_schema},
                     {"cuda_arch", m.cuda_arch ? json(*m.cuda_arch) : json(nullptr)}};
  return {{"format_version", m.format_version},
          {"byte_order", "little"},
          {"built_with", std::move(built_with)},
          {"name", m.name},
          {"device", m.device.str()},
          {"backend", m.backend},
          {"num_user_inputs", m.num_user_inputs},
          {"tensors", std::move(tensors)},
          {"state", std::move(state)},
          {"compiles", std::move(compiles)}};
}

// ---- JSON to manifest, checking everything ---------------------------------------------------

// Reads one manifest field; `where` names it ("compiles[2].user_inputs[0].sizes") in errors.
class Reader {
 public:
  Reader(const std::filesystem::path& path, uint64_t data_size) : path_(path), data_size_(data_size) {}

  [[noreturn]] void fail(const std::string& where, const std::string& what) const {
    throw PackageError(fmt::format("package '{}': manifest field '{}': {}", path_.string(), where, what));
  }

  const json& field(const json& object, const char* key, const std::string& where) const {
    if (!object.is_object()) fail(where, "not an object");
    auto it = object.find(key);
    if (it == object.end()) fail(where_of(where, key), "missing");
    return *it;
  }
  std::string where_of(const std::string& where, const char* key) const {
    return where.empty() ? std::string(key) : where + "." + key;
  }

  template <typename T>
  T get(const json& object, const char* key, const std::string& where) const {
    const json& value = field(object, key, where);
    try {
      return value.get<T>();
    } catch (const json::exception&) {
      fail(where_of(where, key), fmt::format("unexpected value {}", value.dump().substr(0, 80)));
    }
  }

  const json& array(const json& object, const char* key, const std::string& where) const {
    const json& value = field(object, key, where);
    if (!value.is_array()) fail(where_of(where, key), "not an array");
    return value;
  }

  std::vector<int64_t> dims(const json& object, const char* key, const std::string& where) const {
    auto values = get<std::vector<int64_t>>(object, key, where);
    if (values.size() > 64) fail(where_of(where, key), "more than 64 dimensions");
    for (int64_t v : values)
      if (v < 0) fail(where_of(where, key), fmt::format("negative value {}", v));
    return values;
  }

  c10::Device device(const json& object, const char* key, const std::string& where) const {
    auto text = get<std::string>(object, key, where);
    try {
      return c10::Device(text);
    } catch (const std::exception&) { fail(where_of(where, key), fmt::format("'{}' is not a device", text)); }
  }

  TensorMeta meta(const json& object, const std::string& where) const {
    TensorMeta meta;
    auto dtype_name = get<std::string>(object, "dtype", where);
    auto dtype = dtype_from_short_name(dtype_name);
    if (!dtype) fail(where_of(where, "dtype"), fmt::format("'{}' is not a dtype", dtype_name));
    meta.dtype = *dtype;
    meta.sizes = dims(object, "sizes", where);
    meta.strides = dims(object, "strides", where);
    if (meta.strides.size() != meta.sizes.size())
      fail(where_of(where, "strides"), fmt::format("{} strides for {} sizes", meta.strides.size(), meta.sizes.size()));
    meta.device = device(object, "device", where);
    return meta;
  }

  PackageBlob blob(const json& object, const std::string& where) const {
    const std::string at = where_of(where, "blob");
    PackageBlob blob;
    blob.offset = get<uint64_t>(object, "offset", at);
    blob.size = get<uint64_t>(object, "size", at);
    auto hex = get<std::string>(object, "xxh3", at);
    std::size_t used = 0;
    try {
      blob.checksum = std::stoull(hex, &used, 16);
    } catch (const std::exception&) { used = 0; }
    if (hex.size() != 16 || used != hex.size()) fail(at + ".xxh3", fmt::format("'{}' is not 16 hex digits", hex));
    if (blob.offset % kPackageAlignment != 0)
      fail(at + ".offset", fmt::format("{} is not 64-byte aligned", blob.offset));
    if (blob.offset > data_size_ || blob.size > data_size_ - blob.offset)
      fail(at, fmt::format("bytes [{}, +{}) lie past the end of the file's data ({} bytes): the file is truncated",
                           blob.offset, blob.size, data_size_));
    return blob;
  }

 private:
  const std::filesystem::path& path_;
  uint64_t data_size_;
};

// Bytes of a contiguous tensor of `meta`, or nullopt on overflow.
std::optional<uint64_t> contiguous_bytes(const TensorMeta& meta) {
  uint64_t n = c10::elementSize(meta.dtype);
  for (int64_t size : meta.sizes)
    if (__builtin_mul_overflow(n, static_cast<uint64_t>(size), &n)) return std::nullopt;
  return n;
}

PackageManifest parse_manifest(const std::filesystem::path& path, std::string_view text, uint64_t data_size) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {
    throw PackageError(fmt::format("package '{}': the manifest is not JSON: {}", path.string(), e.what()));
  }
  const Reader r(path, data_size);
  PackageManifest m;
  m.format_version = r.get<uint32_t>(j, "format_version", "");
  if (r.get<std::string>(j, "byte_order", "") != "little") r.fail("byte_order", "only little-endian packages are read");
  const json& built = r.field(j, "built_with", "");
  m.aotpipe_version = r.get<std::string>(built, "aotpipe", "built_with");
  m.aotpipe_build = r.get<std::string>(built, "aotpipe_build", "built_with");
  m.torch_version = r.get<std::string>(built, "torch", "built_with");
  m.artifact_schema = r.get<int>(built, "artifact_schema", "built_with");
  if (const json& arch = r.field(built, "cuda_arch", "built_with"); !arch.is_null())
    m.cuda_arch = r.get<std::string>(built, "cuda_arch", "built_with");
  m.name = r.get<std::string>(j, "name", "");
  m.device = r.device(j, "device", "");
  m.backend = r.get<std::string>(j, "backend", "");
  m.num_user_inputs = r.get<std::size_t>(j, "num_user_inputs", "");

  const json& tensors = r.array(j, "tensors", "");
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const std::string where = fmt::format("tensors[{}]", i);
    PackageTensor t{r.meta(tensors[i], where), r.blob(r.field(tensors[i], "blob", where), where)};
    if (!t.meta.is_contiguous() || t.meta.device != c10::Device(c10::kCPU))
      r.fail(where, "a stored tensor must be contiguous and on the CPU");
    auto bytes = contiguous_bytes(t.meta);
    if (!bytes || *bytes != t.blob.size)
      r.fail(where,
             fmt::format("its sizes {} of {} need {} bytes, its blob has {}", t.meta.sizes.vec(),
                         dtype_short_name(t.meta.dtype), bytes ? fmt::to_string(*bytes) : "too many", t.blob.size));
    m.tensors.push_back(std::move(t));
  }

  const json& state = r.array(j, "state", "");
  for (std::size_t i = 0; i < state.size(); ++i) {
    const std::string where = fmt::format("state[{}]", i);
    PackageStateEntry s;
    const auto kind = r.get<std::string>(state[i], "kind", where);
    if (kind == "parameter")
      s.kind = PackageStateEntry::Kind::Parameter;
    else if (kind == "buffer")
      s.kind = PackageStateEntry::Kind::Buffer;
    else if (kind == "constant")
      s.kind = PackageStateEntry::Kind::Constant;
    else
      r.fail(where + ".kind", fmt::format("'{}' is not parameter, buffer or constant", kind));
    s.name = r.get<std::string>(state[i], "name", where);
    s.tensor = r.get<std::size_t>(state[i], "tensor", where);
    if (s.tensor >= m.tensors.size())
      r.fail(where + ".tensor",
             fmt::format("the weights of '{}' are missing: tensor {} of {}", s.name, s.tensor, m.tensors.size()));
    s.requires_grad = r.get<bool>(state[i], "requires_grad", where);
    s.persistent = r.get<bool>(state[i], "persistent", where);
    m.state.push_back(std::move(s));
  }

  const json& compiles = r.array(j, "compiles", "");
  for (std::size_t i = 0; i < compiles.size(); ++i) {
    const std::string where = fmt::format("compiles[{}]", i);
    PackageCompile c;
    c.grad_mode = r.get<bool>(compiles[i], "grad_mode", where);
    c.requires_grad = r.get<std::vector<bool>>(compiles[i], "requires_grad", where);
    if (c.requires_grad.size() != m.state.size() + m.num_user_inputs)
      r.fail(where + ".requires_grad", fmt::format("{} entries for {} state tensors and {} user inputs",
                                                   c.requires_grad.size(), m.state.size(), m.num_user_inputs));
    const json& inputs = r.array(compiles[i], "user_inputs", where);
    if (inputs.size() != m.num_user_inputs)
      r.fail(where + ".user_inputs", fmt::format("{} inputs, the program takes {}", inputs.size(), m.num_user_inputs));
    for (std::size_t k = 0; k < inputs.size(); ++k)
      c.user_inputs.push_back(r.meta(inputs[k], fmt::format("{}.user_inputs[{}]", where, k)));
    c.training = r.get<bool>(compiles[i], "training", where);
    c.artifact = r.blob(r.field(compiles[i], "artifact", where), where + ".artifact");
    m.compiles.push_back(std::move(c));
  }
  return m;
}

}  // namespace

std::string_view to_string(PackageStateEntry::Kind kind) {
  switch (kind) {
    case PackageStateEntry::Kind::Parameter: return "parameter";
    case PackageStateEntry::Kind::Buffer: return "buffer";
    case PackageStateEntry::Kind::Constant: return "constant";
  }
  return "?";
}

std::string_view PackageFile::checked(const PackageBlob& blob, std::string_view what) const {
  const std::string_view bytes = this->bytes(blob);
  if (checksum_of(bytes) != blob.checksum)
    throw PackageError(fmt::format("package '{}': {} is corrupted (its checksum does not match the manifest's)",
                                   path_.string(), what));
  return bytes;
}

at::Tensor PackageFile::tensor(const PackageBlob& blob, const TensorMeta& meta) const {
  return tensor_over(mapping_, static_cast<std::size_t>(data_ - mapping_->data()) + blob.offset, meta.sizes,
                     meta.strides, meta.dtype);
}

PackageFile open_package_file(const std::filesystem::path& path) {
  auto fail = [&](const std::string& what) -> PackageError {
    return PackageError(fmt::format("package '{}': {}", path.string(), what));
  };
  std::shared_ptr<const MappedFile> mapping;
  try {
    mapping = MappedFile::open(path);
  } catch (const std::runtime_error& e) { throw PackageError(fmt::format("package {}", e.what())); }
  const auto size = static_cast<uint64_t>(mapping->size());
  if (size < kPackageHeaderSize)
    throw fail(fmt::format("{} bytes: too short for a package header (truncated, or not a package)", size));
  const char* bytes = mapping->data();

  if (std::memcmp(bytes, kMagic.data(), kMagic.size()) != 0) throw fail("not an aotpipe package (no AOTPKG header)");
  const auto version = static_cast<uint32_t>(get_le(bytes + 8, 4));
  if (version != kPackageFormatVersion)
    throw fail(fmt::format("package format version {}; this build of aotpipe reads version {}", version,
                           kPackageFormatVersion));
  const uint64_t manifest_size = get_le(bytes + 16, 8);
  if (manifest_size > size - kPackageHeaderSize)
    throw fail(fmt::format("the manifest's {} bytes lie past the end of the file ({} bytes): the file is truncated",
                           manifest_size, size));
  const std::string_view manifest_text(bytes + kPackageHeaderSize, manifest_size);
  if (checksum_of(manifest_text) != get_le(bytes + 24, 8))
    throw fail("the manifest is corrupted (its checksum does not match the header's)");
  const uint64_t data_start = align_up(kPackageHeaderSize + manifest_size);
  const uint64_t data_size = size > data_start ? size - data_start : 0;

  PackageFile file;
  file.path_ = path;
  file.manifest_ = parse_manifest(path, manifest_text, data_size);
  // The writer pads every blob to the alignment: the file ends exactly after the last padding.
  uint64_t data_end = 0;
  for (const PackageTensor& t : file.manifest_.tensors)
    data_end = std::max(data_end, align_up(t.blob.offset + t.blob.size));
  for (const PackageCompile& c : file.manifest_.compiles)
    data_end = std::max(data_end, align_up(c.artifact.offset + c.artifact.size));
  if (data_end != data_size)
    throw fail(fmt::format("{} bytes of data where the manifest describes {}: the file is {}", data_size, data_end,
                           data_size < data_end ? "truncated" : "longer than written (appended to?)"));
  if (file.manifest_.format_version != version)
    throw fail(
        fmt::format("the manifest says format version {}, the header {}", file.manifest_.format_version, version));
  file.data_ = bytes + data_start;
  file.file_size_ = size;
  file.mapping_ = std::move(mapping);
  return file;
}

void write_package_file(const std::filesystem::path& path, PackageManifest manifest,
                        const std::vector<std::string_view>& blobs) {
  if (blobs.size() != manifest.tensors.size() + manifest.compiles.size())
    throw std::invalid_argument(fmt::format("write_package_file: {} blobs for {} tensors and {} compiles", blobs.size(),
                                            manifest.tensors.size(), manifest.compiles.size()));
  uint64_t offset = 0;
  auto place = [&](PackageBlob& blob, std::string_view bytes) {
    blob = {offset, bytes.size(), checksum_of(bytes)};
    offset = align_up(offset + bytes.size());
  };
  std::size_t next = 0;
  for (PackageTensor& t : manifest.tensors) place(t.blob, blobs[next++]);
  for (PackageCompile& c : manifest.compiles) place(c.artifact, blobs[next++]);

  const std::string text = manifest_json(manifest).dump(1);
  std::string header = package_header(text, manifest.format_version);
  header += text;
  header.resize(align_up(header.size()), '\0');

  const std::filesystem::path temporary = path.string() + fmt::format(".tmp{}", ::getpid());
  {
    std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
    if (!out) throw PackageError(fmt::format("package '{}': cannot write '{}'", path.string(), temporary.string()));
    out.write(header.data(), static_cast<std::streamsize>(header.size()));
    static const std::array<char, kPackageAlignment> zeros{};
    for (std::string_view blob : blobs) {
      out.write(blob.data(), static_cast<std::streamsize>(blob.size()));
      out.write(zeros.data(), static_cast<std::streamsize>(align_up(blob.size()) - blob.size()));
    }
    out.flush();
    if (!out) {
      std::error_code ignored;
      std::filesystem::remove(temporary, ignored);
      throw PackageError(fmt::format("package '{}': writing failed (disk full?)", path.string()));
    }
  }
  std::filesystem::rename(temporary, path);
}

}  // namespace aotpipe
