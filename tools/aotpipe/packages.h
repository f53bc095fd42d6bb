#pragma once
// What the subcommands do with packages (.aotpkg, package/package_format.h): `compile --package`
// writes one, `package info` describes and checks one, `run` runs one.
#include <aotpipe/package/package_format.h>

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace aotpipe::cli {

inline constexpr const char* kPackageExtension = ".aotpkg";

struct PackageRequest {
  std::filesystem::path program;   // the .pt2
  std::filesystem::path package;   // the .aotpkg to write
  std::string device;              // empty: cpu
  std::vector<std::string> sizes;  // --sizes, one set each: "8x256,8x256"
  std::string backend = "interpreter";
  std::string partitioner = "auto";
  bool no_cpu_fallback = false;
};

// `aotpipe compile PROGRAM.pt2 --package FILE`: compiles and writes the package, prints what it
// holds. Returns the exit status.
int write_package_command(const PackageRequest& request);

// One --sizes value: input sizes separated by ',', dimensions by 'x' ("8x256,8x256"; an empty
// item is a 0-d input). Throws std::invalid_argument naming what is wrong.
std::vector<std::vector<int64_t>> parse_sizes(const std::string& text);

// What `package info` prints: versions, device, backend, state, compiles, bytes.
std::string describe_package(const PackageFile& file);

// `aotpipe run FILE.aotpkg`: loads the package and runs each of its compiles once on random
// inputs of its sizes (a training compile forward and backward); throws on any error. Returns
// "N compiles ran" style detail and the time of the calls in ms.
struct PackageRun {
  std::size_t num_inputs = 0, num_outputs = 0, num_compiles = 0;
  double ms = 0;
};
PackageRun run_package(const std::filesystem::path& path, uint64_t seed);

// Whether one of `inputs` is a package (.aotpkg) for a CUDA device or the CUDA-graph backend:
// `run` and `package info` then load CUDA before they start (cuda_plugin.h). Reads manifests
// only; a file that cannot be read is left to the command to report.
bool packages_name_cuda(const std::vector<std::string>& inputs);

}  // namespace aotpipe::cli
