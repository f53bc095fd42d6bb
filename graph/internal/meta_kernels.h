#pragma once
// aotpipe's own Meta kernels (graph/meta_kernels.cpp) register at load time. The tracer calls
// link_meta_kernels() so that the linker keeps that object file of the static library.
namespace aotpipe::detail {
void link_meta_kernels();
}
