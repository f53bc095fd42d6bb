#include <aotpipe/package/package_versions.h>
#include <aotpipe/runtime/artifact_serialization.h>
#include <aotpipe/runtime/build_id.h>

#include <ATen/Context.h>
#include <ATen/detail/CUDAHooksInterface.h>
#include <torch/version.h>
#ifdef AOTPIPE_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

#include <fmt/format.h>

#include <stdexcept>

namespace aotpipe::package_versions {

std::string aotpipe() {
  const std::string_view build = aotpipe_build_id();
  return std::string(build.substr(0, build.find('+')));
}
std::string aotpipe_build() { return std::string(aotpipe_build_id()); }
std::string torch() { return TORCH_VERSION; }
int artifact_schema() { return artifact_schema_version(); }

// Through ATen's CUDA hooks and the CUDA runtime, not libtorch_cuda: a process that loads CUDA
// only on demand (the aotpipe CLI) still answers.
bool has_device(c10::Device device) {
  if (device.is_cpu()) return true;
  if (!device.is_cuda() || !at::globalContext().hasCUDA()) return false;
  const c10::DeviceIndex index = device.has_index() ? device.index() : c10::DeviceIndex{0};
  return index < at::detail::getCUDAHooks().deviceCount();
}

std::optional<std::string> cuda_arch(c10::Device device) {
#ifdef AOTPIPE_HAVE_CUDA
  if (device.is_cuda() && has_device(device)) {
    const int index = device.has_index() ? device.index() : 0;
    int major = 0;
    int minor = 0;
    if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, index) == cudaSuccess &&
        cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, index) == cudaSuccess)
      return fmt::format("sm_{}{}", major, minor);
    // Not left for the next kernel launch's error check to report against an unrelated kernel.
    const cudaError_t error = cudaGetLastError();
    throw std::runtime_error(
        fmt::format("cannot read the compute capability of {}: {}", device.str(), cudaGetErrorString(error)));
  }
#endif
  (void)device;
  return std::nullopt;
}

}  // namespace aotpipe::package_versions
