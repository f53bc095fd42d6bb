#pragma once
// Small torch::nn modules the aot_module and graph signature tests compile. Their layers and
// attribute names match the Python modules of graph_signature_oracle.py, so parameter and buffer
// names (fc1.weight, bn.running_mean, steps) are the same on both sides.
#include <aotpipe/driver/reparametrize_module.h>

#include <torch/torch.h>

namespace aotpipe::testing {

// Linear -> ReLU -> Linear.
struct MlpImpl : torch::nn::Module {
  MlpImpl(int64_t in, int64_t hidden, int64_t out)
      : fc1(register_module("fc1", torch::nn::Linear(in, hidden))),
        fc2(register_module("fc2", torch::nn::Linear(hidden, out))) {}
  at::Tensor forward(const at::Tensor& x) { return fc2(torch::relu(fc1(x))); }
  torch::nn::Linear fc1, fc2;
};
TORCH_MODULE(Mlp);

// Conv2d(2, 3, 3) -> BatchNorm2d(3): BatchNorm's running statistics are buffers the forward
// updates in training mode.
struct ConvBnImpl : torch::nn::Module {
  ConvBnImpl()
      : conv(register_module("conv", torch::nn::Conv2d(2, 3, 3))),
        bn(register_module("bn", torch::nn::BatchNorm2d(3))) {}
  at::Tensor forward(const at::Tensor& x) { return bn(conv(x)); }
  torch::nn::Conv2d conv;
  torch::nn::BatchNorm2d bn;
};
TORCH_MODULE(ConvBn);

// A module of our own with a parameter and a buffer in members (declared below): Linear(4, 3)
// and a step counter the test forwards increment.
struct LinearWithStepsImpl : torch::nn::Module {
  LinearWithStepsImpl() : fc(register_module("fc", torch::nn::Linear(4, 3))) {
    scale = register_parameter("scale", torch::ones({3}));
    steps = register_buffer("steps", torch::zeros({1}));
  }
  torch::nn::Linear fc;
  at::Tensor scale;
  at::Tensor steps;
};
TORCH_MODULE(LinearWithSteps);

inline const bool kTestModulesDeclared = [] {
  register_tensor_members<LinearWithStepsImpl>(
      {{"scale", &LinearWithStepsImpl::scale}, {"steps", &LinearWithStepsImpl::steps}});
  return true;
}();

// Copies the values of `from`'s parameters and buffers into `to` (same structure), so an eager
// and a compiled copy of one module start equal.
inline void copy_module_state(const torch::nn::Module& from, torch::nn::Module& to) {
  torch::NoGradGuard no_grad;
  const auto src = from.named_parameters();
  for (auto& item : to.named_parameters()) item.value().copy_(src[item.key()]);
  const auto src_buffers = from.named_buffers();
  for (auto& item : to.named_buffers()) item.value().copy_(src_buffers[item.key()]);
}

}  // namespace aotpipe::testing
