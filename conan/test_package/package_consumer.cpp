// A runtime-only consumer of aotpipe's Conan package: links aotpipe::package (no tracer, stages,
// pipeline, Boost or oneTBB) and trains the package test_package wrote for two steps: its loss
// must be finite, every parameter must get a gradient, and the step must change the weights.
#include <aotpipe/package/load_package.h>

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include <cstdio>
#include <exception>

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: package_consumer MODEL.aotpkg\n");
    return 2;
  }
  try {
    const aotpipe::PackagedProgram model = aotpipe::load_package(argv[1]);
    const at::Tensor tokens = at::randint(0, 16, {2, 6}, at::kLong);  // tied_lm_head's input
    double losses[2] = {0, 0};
    for (double& loss_value : losses) {
      for (const at::Tensor& p : model.parameter_tensors()) p.mutable_grad() = at::Tensor();
      const at::Tensor loss = model({tokens})[0].sum();
      loss.backward();
      for (const aotpipe::NamedTensor& p : model.parameters()) {
        if (!p.tensor.grad().defined()) {
          std::fprintf(stderr, "package_consumer: %s has no gradient\n", p.name.c_str());
          return 1;
        }
      }
      at::NoGradGuard no_grad;
      for (const at::Tensor& p : model.parameter_tensors()) p.sub_(p.grad(), 0.1);
      loss_value = loss.item<double>();
    }
    if (!(losses[0] == losses[0]) || losses[0] == losses[1]) {
      std::fprintf(stderr, "package_consumer: losses %f then %f\n", losses[0], losses[1]);
      return 1;
    }
    std::printf("package_consumer: trained %s from its package, loss %.6f -> %.6f\n", model.name().c_str(), losses[0],
                losses[1]);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "package_consumer: %s\n", e.what());
    return 1;
  }
}
