#pragma once
// load_package: a program compiled ahead of time into an .aotpkg file (`aotpipe compile model.pt2
// --package model.aotpkg`, or write_package in export/package_writer.h), loaded and called with
// no compiler in the process: no trace and no stage runs, only the runtime and the backend (the
// aotpipe::package component links neither the tracer, the stages, the pipeline nor Boost).
//
//   aotpipe::PackagedProgram model = aotpipe::load_package("gpt.aotpkg");
//   torch::optim::AdamW opt(model.parameter_tensors(), torch::optim::AdamWOptions(1e-3));
//   at::Tensor loss = model({tokens, targets})[0];   // training: grad mode on
//   loss.backward();                                  // parameters get .grad
//   opt.step();
//
// Calls behave as CompiledExportedProgram's (export/compiled_exported_program.h): parameters
// are leaves that receive .grad, buffer and input mutations land in the program's buffers and
// the inputs, and grad mode picks the training or the inference compile. Format, versioning and
// what a load checks: docs/packages.md.
#include <aotpipe/graph/calling_convention.h>
#include <aotpipe/graph/named_tensor.h>

#include <c10/core/Device.h>

#include <cstddef>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace aotpipe {

struct PackageManifest;  // package/package_format.h

// Compiles a call no compile of a package serves: given the call's flat arguments (the state, then
// the user inputs), returns its callable. compile_missing_from (export/package_writer.h) makes one
// from the program's .pt2; it needs the full library.
using CompileOnDemand = std::function<std::function<TensorList(TensorList)>(const TensorList& flat_args)>;

struct LoadPackageOptions {
  // Where the program runs: the device it was compiled for (the default). Another device is
  // refused with an error saying how to compile for it.
  std::optional<c10::Device> device;
  // Check every blob's checksum at load (all weights and artifacts). false: only the manifest's
  // (the rest is still range-checked), for a load that must not read the weights up front.
  bool verify = true;
  // Empty: a call no compile serves throws PackageError. Set: such a call compiles its signature
  // (grad mode, sizes, dtypes, requires_grad) once, on demand, and later calls reuse it.
  CompileOnDemand compile_missing;
};

class PackagedProgram {
 public:
  // Returns the user outputs. Throws PackageError naming the input when the package has no
  // compile for these inputs (sizes, dtypes, device, requires_grad), and listing what it has,
  // unless the load was given compile_missing.
  TensorList operator()(const TensorList& user_inputs) const;

  const std::string& name() const;
  c10::Device device() const;
  std::size_t num_user_inputs() const;
  // The state by fully qualified name. Tied parameters (one tensor under several names) are one
  // tensor here, as in the exported program.
  const std::vector<NamedTensor>& parameters() const;
  const std::vector<NamedTensor>& buffers() const;
  const std::vector<NamedTensor>& constants() const;
  // Each parameter tensor once (tied names share one): what an optimizer takes.
  TensorList parameter_tensors() const;
  const PackageManifest& manifest() const;
  // Signatures compiled on demand so far (LoadPackageOptions::compile_missing).
  std::size_t num_compiled_on_demand() const;

 private:
  friend PackagedProgram load_package(const std::filesystem::path& path, LoadPackageOptions options);
  struct Impl;
  std::shared_ptr<const Impl> impl_;
};

// Opens, checks and loads a package: the state is mapped from the file (copy-on-write, so
// training never writes the file) or copied to the device; each compile is decoded on its first
// call. Throws PackageError naming the file and what is wrong: not a package, truncated or
// corrupted, another format version, built with another torch version or artifact schema or
// for another CUDA architecture or device, weights missing.
PackagedProgram load_package(const std::filesystem::path& path, LoadPackageOptions options = {});

}  // namespace aotpipe
