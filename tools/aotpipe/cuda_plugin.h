#pragma once
// CUDA, loaded on demand. The aotpipe executable links libtorch_cpu and libc10 only; libtorch_cuda,
// the CUDA libraries and the CUDA-graph backend come in one plugin (libaotpipe_cuda_plugin.so)
// that a command loads before it starts when it needs CUDA. A CPU compile then maps about 140 MB
// instead of 380 (docs/benchmarks/scaling.md, "Weights").
//
// ATen decides once, at its first question about CUDA (at::detail::getCUDAHooks()), whether CUDA
// is there: the plugin is loaded before any ATen work, and load_cuda() checks that it was.
#include <c10/core/Device.h>

#include <string_view>

namespace aotpipe::cli {

// Loads the plugin before the command runs where this build has one and
// - AOTPIPE_LOAD_CUDA says so (1, or 0/false/off/no for never);
// - else the command names a CUDA device or backend: a plugin that does not load is then an error
//   (std::runtime_error naming the files tried and the loader's reason);
// - else the machine has an NVIDIA GPU (inputs on cuda then run there, as they would with every
//   library linked): a plugin that does not load is a warning, and the command goes on without.
// The plugin is $AOTPIPE_CUDA_PLUGIN, else beside the executable, else where it is installed. A
// plugin file of another build of aotpipe (its build id, read before loading) is not loaded.
void load_cuda_if_wanted(bool command_names_cuda);

// Whether a command line's --device (cuda, cuda:N) or --backend (cuda_graphs) names CUDA.
bool names_cuda(std::string_view device, std::string_view backend = {});

// Whether libtorch_cuda is in this process (loaded, or linked by a program other than the CLI).
bool cuda_loaded();

// Throws std::runtime_error when `device` is a CUDA device and this build's plugin is not loaded,
// saying for `what` (a graph's name) how to ask for it: a compile for CUDA on fake tensors still
// needs libtorch_cuda's answers (cuDNN's convolution layout, batch norm's kernel), which a
// CPU-only process would silently get wrong. A build without the plugin links what it has.
void require_cuda_for(c10::Device device, std::string_view what);

}  // namespace aotpipe::cli
