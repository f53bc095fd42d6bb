// aot_function: compile a function that updates a buffer in place, call it, backpropagate, and
// check outputs, the buffer and the gradient against eager PyTorch.
#include <aotpipe/aotpipe.h>

#include <ATen/ATen.h>

#include <iostream>

int main() {
  // Flat tensors in, flat tensors out. a[1] is a buffer updated in place, as BatchNorm's running mean.
  aotpipe::Function fn = [](const aotpipe::TensorList& a) {
    a[1].mul_(0.9).add_(a[0].detach().mean(0), 0.1);
    return aotpipe::TensorList{(a[0] - a[1]).pow(2).sum()};
  };
  aotpipe::CompiledFunction compiled = aotpipe::aot_function(fn);

  at::Tensor x = at::randn({4, 5}).requires_grad_(true);
  at::Tensor running_mean = at::zeros({5});
  aotpipe::TensorList out = compiled({x, running_mean});  // the first call with this signature compiles
  out[0].backward();                                      // through the compiled backward

  // Eager PyTorch on copies of the same inputs.
  at::Tensor x_eager = x.detach().clone().requires_grad_(true);
  at::Tensor running_mean_eager = at::zeros({5});
  aotpipe::TensorList expected = fn({x_eager, running_mean_eager});
  expected[0].backward();

  // A later call with the same signature reuses the compile; a new shape compiles again.
  compiled({at::randn({4, 5}).requires_grad_(true), at::zeros({5})});
  compiled({at::randn({8, 5}).requires_grad_(true), at::zeros({5})});

  const bool same = at::allclose(out[0], expected[0]) && at::allclose(running_mean, running_mean_eager) &&
                    at::allclose(x.grad(), x_eager.grad()) && compiled.num_compiled() == 2;
  std::cout << "loss " << out[0].item<float>() << ", " << compiled.num_compiled() << " compiles: "
            << (same ? "matches eager" : "DIFFERS from eager") << "\n";
  return same ? 0 : 1;
}
