#pragma once
// The .aotpkg container: one file holding a compiled program's artifacts (one per compiled set
// of sizes and grad mode), its state (each tensor once, raw, 64-byte aligned so it can be mapped)
// and a JSON manifest saying what is where and what built it. See docs/packages.md.
//
//   offset 0   magic "AOTPKG\n\0"
//          8   u32 format version          12  u32 zero
//         16   u64 manifest length         24  u64 XXH3-64 of the manifest
//         32   manifest (JSON, UTF-8)
//          D   data: every blob at D + its offset, D and each offset a multiple of 64
//
// Integers are little-endian. Every blob (a tensor's bytes, an artifact) has its own XXH3-64 in
// the manifest, so a reader checks exactly what it uses, and `aotpipe package info` all of it.
// The reader treats the file as untrusted: every length, offset, index and name is checked and
// anything wrong is a PackageError naming the file and the field, never a crash.
#include <aotpipe/graph/mapped_file.h>
#include <aotpipe/graph/tensor_meta.h>

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace aotpipe {

// Everything wrong with a package, or with a call of its program: the message names the file
// and what is wrong (the field, the input, the version).
class PackageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

inline constexpr uint32_t kPackageFormatVersion = 1;
inline constexpr std::size_t kPackageAlignment = 64;
// A package starts with this many bytes: the magic, the format version, then the manifest's
// length and XXH3-64 checksum (little-endian u64s at 16 and 24, docs/packages.md).
inline constexpr std::size_t kPackageHeaderSize = 32;

// The header of a package whose manifest is `manifest` (what write_package_file writes).
std::string package_header(std::string_view manifest, uint32_t format_version = kPackageFormatVersion);
// Rewrites the manifest checksum in the header of `bytes` (a whole package) to match the manifest
// its length field names, so that a tool editing a manifest in place (the package fuzzer) gets
// past the checksum test; false where the bytes are too short or the length runs past them.
bool reseal_manifest_checksum(std::string& bytes);

// Bytes of the data section.
struct PackageBlob {
  uint64_t offset = 0;  // from the data section's start
  uint64_t size = 0;
  uint64_t checksum = 0;  // XXH3-64
};

// One stored tensor: contiguous bytes of `meta` (strides contiguous, offset 0, on the CPU).
struct PackageTensor {
  TensorMeta meta;
  PackageBlob blob;
};

// One lifted input of the program (graph input order: parameters, buffers, constants).
struct PackageStateEntry {
  enum class Kind { Parameter, Buffer, Constant };
  Kind kind = Kind::Parameter;
  std::string name;        // fully qualified ("layer1.bn1.running_mean")
  std::size_t tensor = 0;  // index into PackageManifest::tensors (tied names share one)
  bool requires_grad = false;
  bool persistent = true;  // buffers
};

// One compile: the artifact serving calls whose grad mode, requires_grad pattern and user input
// metadata are these.
struct PackageCompile {
  bool grad_mode = true;
  std::vector<bool> requires_grad;      // per flat argument: lifted state, then user inputs
  std::vector<TensorMeta> user_inputs;  // sizes, strides, dtype, device
  bool training = false;                // the artifact has a backward
  PackageBlob artifact;                 // serialize_artifact's bytes
};

struct PackageManifest {
  uint32_t format_version = kPackageFormatVersion;
  // What built it. Loading checks the torch version and the artifact schema (and the CUDA
  // architecture where one is recorded); the aotpipe version and build are informative.
  std::string aotpipe_version;
  std::string aotpipe_build;
  std::string torch_version;
  int artifact_schema = 0;
  std::optional<std::string> cuda_arch;  // "sm_90": the compute capability it was built on

  std::string name;  // the program's (the .pt2's stem)
  c10::Device device = c10::Device(c10::kCPU);
  std::string backend;  // "interpreter", "cuda_graphs"
  std::size_t num_user_inputs = 0;
  std::vector<PackageTensor> tensors;
  std::vector<PackageStateEntry> state;
  std::vector<PackageCompile> compiles;
};

std::string_view to_string(PackageStateEntry::Kind kind);

// An open package: its manifest and its data section, mapped copy-on-write (the state's tensors
// are views of it, so loading costs no copy, and an optimizer's in-place updates never reach the
// file).
class PackageFile {
 public:
  const std::filesystem::path& path() const { return path_; }
  const PackageManifest& manifest() const { return manifest_; }
  uint64_t file_size() const { return file_size_; }
  // The blob's bytes (their range is checked at open, their checksum is not).
  std::string_view bytes(const PackageBlob& blob) const { return {data_ + blob.offset, blob.size}; }
  // The blob's bytes, after checking its checksum (PackageError naming `what` on a mismatch).
  std::string_view checked(const PackageBlob& blob, std::string_view what) const;
  // The blob as a tensor of `meta`'s layout over the mapped file (copy-on-write); not checked.
  at::Tensor tensor(const PackageBlob& blob, const TensorMeta& meta) const;
  // What keeps the mapping alive (tensors viewing it hold it).
  std::shared_ptr<const void> owner() const { return mapping_; }

 private:
  friend PackageFile open_package_file(const std::filesystem::path& path);
  std::filesystem::path path_;
  PackageManifest manifest_;
  std::shared_ptr<const MappedFile> mapping_;
  const char* data_ = nullptr;
  uint64_t file_size_ = 0;
};

// Opens and checks the container: magic, format version, lengths, the manifest's checksum and
// every field (names, dtypes, indices, blob ranges inside the file). Blob checksums are checked
// when a blob is used (PackageFile::checked). Throws PackageError.
PackageFile open_package_file(const std::filesystem::path& path);

// Writes a package: the manifest (blob offsets and checksums filled in here from `blobs`,
// which are in the order of the manifest's tensors, then its compiles) and the blobs, to a
// temporary file renamed over `path`, so a reader never sees half a package.
void write_package_file(const std::filesystem::path& path, PackageManifest manifest,
                        const std::vector<std::string_view>& blobs);

}  // namespace aotpipe
