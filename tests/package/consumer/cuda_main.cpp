// A CUDA consumer of the installed package: aot_function on CUDA tensors, called on a side stream
// (c10::cuda, from aotpipe::torch_cuda). Builds everywhere the package finds libtorch's CUDA
// library; runs its check only where a GPU is present.
#include <aotpipe/aotpipe.h>

#include <ATen/ATen.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/cuda.h>

#include <cstdio>

int main() {
  if (!torch::cuda::is_available()) {
    std::puts("cuda_consumer: built and linked; no CUDA GPU here, so nothing ran");
    return 0;
  }
  auto fn = [](const aotpipe::TensorList& a) { return aotpipe::TensorList{(a[0].sin() * a[1]).sum()}; };
  aotpipe::CompiledFunction compiled = aotpipe::aot_function(fn);
  at::Tensor x = at::randn({64}, at::kCUDA).requires_grad_(true);
  at::Tensor y = at::randn({64}, at::kCUDA);
  c10::cuda::CUDAStreamGuard guard(c10::cuda::getStreamFromPool());
  at::Tensor out = compiled({x, y})[0];
  out.backward();
  c10::cuda::getCurrentCUDAStream().synchronize();
  const bool ok = at::allclose(out, fn({x.detach(), y})[0]) && at::allclose(x.grad(), x.detach().cos() * y);
  std::puts(ok ? "cuda_consumer: ok" : "cuda_consumer: MISMATCH");
  return ok ? 0 : 1;
}
