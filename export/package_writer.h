#pragma once
// write_package: an exported program compiled ahead of time into one .aotpkg file that
// load_package (package/load_package.h) runs with no compiler in the process. For each set of
// user input sizes, a training compile (grad mode on, the parameters requiring grad) and an
// inference compile (grad mode off); the program's state stored once. See docs/packages.md.
#include <aotpipe/export/exported_program.h>
#include <aotpipe/package/load_package.h>

#include <c10/core/Device.h>

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace aotpipe {

struct PackageOptions {
  // The device the program was loaded for (load_exported_program's option): where its compiles
  // run. A GPU is not needed to compile for one (compiles run on metadata).
  c10::Device device = c10::Device(c10::kCPU);
  // One entry per set of user inputs to compile for: their sizes, in input order (dtypes are the
  // export's). Empty: the archive's sample inputs' sizes, else the export's.
  std::vector<std::vector<std::vector<int64_t>>> sizes;
  // The compile's configuration; its backend compilers are named by `backend`, which a load
  // looks up by that name ("interpreter", "cuda_graphs").
  AotConfig config;
  std::string backend = "interpreter";
  bool training = true;   // a training compile per set of sizes
  bool inference = true;  // an inference compile per set of sizes
};

// What write_package wrote.
struct PackageSummary {
  std::size_t compiles = 0;
  std::size_t tensors = 0;  // stored once each
  std::uint64_t state_bytes = 0;
  std::uint64_t file_bytes = 0;
};

// Throws Pt2Error for sizes the export does not allow (naming the input and dimension),
// PackageError when a state tensor has no data (weights missing) or the file cannot be
// written, CompileError (with the stage) when a compile fails.
PackageSummary write_package(const ExportedProgram& program, const std::filesystem::path& path,
                             const PackageOptions& options = {});

// LoadPackageOptions::compile_missing for a package of `program` (its .pt2, loaded for the
// package's device): a call with sizes the package lacks is compiled then, as
// compile_exported_program would (sizes checked against the export first, Pt2Error naming the
// input and dimension). Throws PackageError when a call's arguments do not fit the program (a
// package of another program).
CompileOnDemand compile_missing_from(ExportedProgram program, AotConfig config = {});

}  // namespace aotpipe
