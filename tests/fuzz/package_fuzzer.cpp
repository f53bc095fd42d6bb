// .aotpkg packages as arbitrary bytes. The header's checksum of the manifest is recomputed for
// each input (the bytes at 24..32 are XXH3-64 of the manifest, docs/packages.md), so mutations
// of the manifest reach its reader rather than the checksum test. open_package_file and
// load_package (even-sized inputs check every blob's checksum, odd-sized ones only ranges)
// reject bad bytes with PackageError only.
#include "fuzz_input.h"

#include <aotpipe/package/load_package.h>
#include <aotpipe/package/package_format.h>

#include <string>

using namespace aotpipe;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  constexpr std::string_view target = "package";
  std::string bytes(fuzz::as_text(data, size));
  reseal_manifest_checksum(bytes);
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
