#include "aotpipe/cuda_plugin.h"

#include <aotpipe/runtime/build_id.h>

#include <ATen/detail/CUDAHooksInterface.h>
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <dlfcn.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <stdexcept>
#include <string>
#include <system_error>
#include <typeinfo>
#include <vector>

namespace aotpipe::cli {

namespace {

#ifdef AOTPIPE_HAVE_CUDA_PLUGIN
constexpr const char* kPluginName = "libaotpipe_cuda_plugin.so";

bool has_nvidia_gpu() {
  std::error_code ec;
  if (std::filesystem::exists("/dev/nvidiactl", ec)) return true;
  std::filesystem::directory_iterator gpus("/proc/driver/nvidia/gpus", ec);
  return !ec && gpus != std::filesystem::directory_iterator();
}

std::vector<std::filesystem::path> plugin_candidates() {
  if (const char* explicit_path = std::getenv("AOTPIPE_CUDA_PLUGIN"); explicit_path && *explicit_path)
    return {explicit_path};
  std::error_code ec;
  const std::filesystem::path exe_dir = std::filesystem::read_symlink("/proc/self/exe", ec).parent_path();
  if (ec) return {kPluginName};  // the loader's own search path
  return {exe_dir / kPluginName, exe_dir / AOTPIPE_CUDA_PLUGIN_INSTALLED};
}

// Why `path` must not be loaded, read from the file without loading it: a plugin of another build
// binds to this executable's aotpipe symbols, whose layouts may differ, so not even its static
// initializers may run. The plugin carries its build id after a marker (cmake/build_id.cmake).
// Empty: the file is this build's, or unreadable (dlopen then says why).
std::string plugin_mismatch(const std::filesystem::path& path) {
  std::ifstream file(path, std::ios::binary);
  if (!file) return {};
  const std::string bytes((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  constexpr std::string_view marker = "aotpipe-cuda-plugin-build-id:";
  const std::size_t at = bytes.find(marker);
  if (at == std::string::npos) return "it carries no aotpipe build id (not a CUDA plugin of aotpipe)";
  const std::size_t begin = at + marker.size();
  const std::string id = bytes.substr(begin, bytes.find('\0', begin) - begin);
  if (id == aotpipe_build_id()) return {};
  return fmt::format("it is from another build of aotpipe ({}; this executable is {}): install or build both together",
                     id, aotpipe_build_id());
}

// AOTPIPE_LOAD_CUDA: nullopt where unset or empty.
std::optional<bool> load_cuda_setting() {
  const char* setting = std::getenv("AOTPIPE_LOAD_CUDA");
  if (!setting || !*setting) return std::nullopt;
  const std::string_view value(setting);
  return !(value == "0" || value == "false" || value == "off" || value == "no");
}

void load_cuda() {
  std::string tried;
  for (const std::filesystem::path& candidate : plugin_candidates()) {
    if (const std::string mismatch = plugin_mismatch(candidate); !mismatch.empty()) {
      tried += fmt::format("\n  {}: {}", candidate.string(), mismatch);
      continue;
    }
    // RTLD_GLOBAL: libtorch_cuda's symbols serve what loads after it (cuDNN, cuBLAS).
    if (dlopen(candidate.c_str(), RTLD_NOW | RTLD_GLOBAL)) {
      spdlog::debug("CUDA loaded from {}", candidate.string());
      // ATen keeps the answer of its first question about CUDA: asked before this load, it
      // answers "no CUDA" for the whole process. A bug of the CLI, not of the input.
      if (typeid(at::detail::getCUDAHooks()) == typeid(at::CUDAHooksInterface))
        throw std::logic_error(
            "CUDA was loaded after ATen had asked for it: load_cuda() must run before any ATen work");
      return;
    }
    tried += fmt::format("\n  {}: {}", candidate.string(), dlerror());
  }
  throw std::runtime_error(fmt::format("cannot load CUDA (the CUDA-graph backend and libtorch_cuda):{}", tried));
}
#endif

}  // namespace

bool cuda_loaded() { return at::CUDAHooksRegistry()->Has("CUDAHooks"); }

bool names_cuda(std::string_view device, std::string_view backend) {
  return device.starts_with("cuda") || backend == "cuda_graphs";
}

void load_cuda_if_wanted(bool command_names_cuda) {
#ifdef AOTPIPE_HAVE_CUDA_PLUGIN
  if (cuda_loaded()) return;
  const std::optional<bool> setting = load_cuda_setting();
  if (setting.has_value() ? *setting : command_names_cuda) {
    load_cuda();
  } else if (!setting.has_value() && has_nvidia_gpu()) {
    try {
      load_cuda();
    } catch (const std::runtime_error& e) {
      spdlog::warn("this machine has an NVIDIA GPU, but {}; going on without CUDA", e.what());
    }
  }
#else
  (void)command_names_cuda;
#endif
}

void require_cuda_for(c10::Device device, std::string_view what) {
#ifdef AOTPIPE_HAVE_CUDA_PLUGIN
  if (!device.is_cuda() || cuda_loaded()) return;
  if (load_cuda_setting() == std::optional<bool>(false))
    throw std::runtime_error(fmt::format("{} is on {}, and AOTPIPE_LOAD_CUDA={} keeps CUDA out of this process", what,
                                         device.str(), std::getenv("AOTPIPE_LOAD_CUDA")));
  throw std::runtime_error(
      fmt::format("{} is on {}, and this process did not load CUDA: pass --device {} (or set AOTPIPE_LOAD_CUDA=1)",
                  what, device.str(), device.str()));
#else
  (void)device;
  (void)what;
#endif
}

}  // namespace aotpipe::cli
