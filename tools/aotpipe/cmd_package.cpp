// aotpipe package info FILE... [--no-verify]
//
// What each package (.aotpkg, written by `aotpipe compile PROGRAM.pt2 --package FILE`) holds:
// the versions it was built with, its device and backend, its state and its compiles (sizes,
// grad mode, bytes), then "integrity: ok" once every blob's checksum matched and the package
// loads in this process (versions, device). A package that fails is reported with the reason,
// the others still are; the exit status is 1 when any failed.
#include "aotpipe/commands.h"
#include "aotpipe/packages.h"

#include <aotpipe/package/load_package.h>

#include <fmt/format.h>

#include <exception>
#include <memory>
#include <string>
#include <vector>

namespace aotpipe::cli {
namespace {

struct InfoOptions {
  std::vector<std::string> files;
  bool no_verify = false;
};

// Describes one package; false when it cannot be read or would not load here.
bool info(const std::string& path, const InfoOptions& options) {
  try {
    const PackageFile file = open_package_file(path);
    fmt::print("{}", describe_package(file));
    if (options.no_verify) return true;
    const PackageManifest& m = file.manifest();
    for (std::size_t i = 0; i < m.tensors.size(); ++i)
      file.checked(m.tensors[i].blob, fmt::format("stored tensor {}", i));
    for (std::size_t k = 0; k < m.compiles.size(); ++k)
      file.checked(m.compiles[k].artifact, fmt::format("compile {} (its artifact)", k));
    LoadPackageOptions unchecked;  // the checksums were checked above
    unchecked.verify = false;
    (void)load_package(path, unchecked);
    fmt::print("integrity   ok (every checksum matches; loads in this process)\n");
    return true;
  } catch (const std::exception& e) {
    fmt::print("{}: FAILED: {}\n", path, e.what());
    return false;
  }
}

}  // namespace

Command add_package_command(CLI::App& parent) {
  auto options = std::make_shared<InfoOptions>();
  CLI::App* app = parent.add_subcommand("package", "Packages (.aotpkg): what they hold, checked");
  app->require_subcommand(1);
  CLI::App* info_app = app->add_subcommand(
      "info", "Print what each package holds (versions, device, backend, state, compiles) and check it");
  info_app->add_option("files", options->files, "Package files (.aotpkg)")->required();
  info_app->add_flag("--no-verify", options->no_verify, "Only read the manifest: skip the checksums and the load");
  return {app,
          [options] {
            bool ok = true;
            for (std::size_t i = 0; i < options->files.size(); ++i) {
              if (i) fmt::print("\n");
              ok &= info(options->files[i], *options);
            }
            return ok ? 0 : 1;
          },
          [options] { return packages_name_cuda(options->files); }};
}

}  // namespace aotpipe::cli
