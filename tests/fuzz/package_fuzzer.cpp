// .aotpkg packages as arbitrary bytes. The header's checksum of the manifest is recomputed for
// each input (the bytes at 24..32 are XXH3-64 of the manifest, docs/packages.md), so mutations
// of the manifest reach its reader rather than the checksum test. open_package_file and
// load_package (even-sized inputs check every blob's checksum, odd-sized ones only ranges)
// reject bad bytes with PackageError only.
#include "fuzz_input.h"

#include <aotpipe/package/load_package.h>
#include <aotpipe/package/package_format.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include <cstring>
#include <string>

using namespace aotpipe;

namespace {

// The little-endian u64 at `offset` of `bytes`.
uint64_t get_le64(const std::string& bytes, std::size_t offset) {
  uint64_t value = 0;
  for (std::size_t i = 0; i < 8; ++i) value |= uint64_t{static_cast<unsigned char>(bytes[offset + i])} << (8 * i);
  return value;
}

void put_le64(std::string& bytes, std::size_t offset, uint64_t value) {
  for (std::size_t i = 0; i < 8; ++i) bytes[offset + i] = static_cast<char>((value >> (8 * i)) & 0xff);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  constexpr std::string_view target = "package";
  std::string bytes(fuzz::as_text(data, size));
  constexpr std::size_t kHeader = 32;
  if (bytes.size() >= kHeader) {
    const uint64_t manifest_size = get_le64(bytes, 16);
    if (manifest_size <= bytes.size() - kHeader)
      put_le64(bytes, 24, XXH3_64bits(bytes.data() + kHeader, manifest_size));
  }
  const fuzz::MemoryFile file(bytes);
  fuzz::rejects_only_with<PackageError>(target, "PackageError", [&] { (void)open_package_file(file.path()); });
  fuzz::rejects_only_with<PackageError>(target, "PackageError", [&] {
    LoadPackageOptions options;
    options.verify = size % 2 == 0;
    const PackagedProgram program = load_package(file.path(), options);
    (void)program.parameter_tensors();
  });
  return 0;
}
