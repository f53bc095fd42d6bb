#pragma once
// What a package records about the process that built it, and what a load compares with the
// process that loads it (docs/packages.md, "Versions").
#include <c10/core/Device.h>

#include <optional>
#include <string>

namespace aotpipe::package_versions {

std::string aotpipe();        // "0.1.0"
std::string aotpipe_build();  // the build id (runtime/build_id.h)
std::string torch();          // libtorch's version, "2.11.0+cu130"
int artifact_schema();        // runtime/artifact_serialization.h's artifact_schema_version
// Whether this process can run on `device` (a CUDA device it has; the CPU always).
bool has_device(c10::Device device);
// "sm_90" for a CUDA device this process has; nullopt for the CPU, or a build without CUDA.
// Throws std::runtime_error where the CUDA runtime cannot tell (the error is cleared).
std::optional<std::string> cuda_arch(c10::Device device);

}  // namespace aotpipe::package_versions
