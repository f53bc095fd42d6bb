// aot_module in one page: compile a small conv + BatchNorm classifier, run one SGD training step
// through the compiled module and the same step eagerly on an identical copy, and check that the
// loss, the parameter gradients, the updated parameters and BatchNorm's running statistics agree.
// Prints the graph signature of the compile. Returns non-zero on a mismatch. See docs/aot_module.md.
#include <aotpipe/aotpipe.h>

#include <torch/torch.h>

#include <iostream>

namespace {

struct NetImpl : torch::nn::Module {
  NetImpl()
      : conv(register_module("conv", torch::nn::Conv2d(torch::nn::Conv2dOptions(1, 4, 3).padding(1)))),
        bn(register_module("bn", torch::nn::BatchNorm2d(4))),
        fc(register_module("fc", torch::nn::Linear(4 * 8 * 8, 10))) {}
  at::Tensor forward(const at::Tensor& x) { return fc(torch::relu(bn(conv(x))).flatten(1)); }
  torch::nn::Conv2d conv;
  torch::nn::BatchNorm2d bn;
  torch::nn::Linear fc;
};
TORCH_MODULE(Net);

// The module's forward plus the loss: inputs {images, labels}, outputs {loss}.
aotpipe::TensorList net_loss(torch::nn::Module& module, const aotpipe::TensorList& inputs) {
  at::Tensor logits = dynamic_cast<NetImpl&>(module).forward(inputs[0]);
  return {torch::nn::functional::cross_entropy(logits, inputs[1])};
}

bool same(const at::Tensor& a, const at::Tensor& b, const std::string& what) {
  if (a.defined() && b.defined() && at::allclose(a, b, 1e-4, 1e-5)) return true;
  std::cerr << "mismatch: " << what << "\n";
  return false;
}

}  // namespace

int main() {
  torch::manual_seed(0);
  Net eager;
  Net compiled_net;
  {  // start from the same state
    torch::NoGradGuard no_grad;
    for (auto& p : compiled_net->named_parameters()) p.value().copy_(eager->named_parameters()[p.key()]);
  }
  // Conv2d, BatchNorm2d and Linear are libtorch layers: aot_module knows where they keep their
  // tensors. A layer type of your own is declared once with aotpipe::register_tensor_members.
  aotpipe::CompiledModule compiled = aotpipe::aot_module(compiled_net.ptr(), net_loss);

  const at::Tensor images = torch::randn({16, 1, 8, 8});
  const at::Tensor labels = torch::randint(0, 10, {16});
  torch::optim::SGD eager_opt(eager->parameters(), 0.1);
  torch::optim::SGD compiled_opt(compiled_net->parameters(), 0.1);

  at::Tensor eager_loss = net_loss(*eager, {images, labels})[0];
  at::Tensor compiled_loss = compiled({images, labels})[0];  // compiles on this first call
  eager_loss.backward();
  compiled_loss.backward();  // through the compiled backward: gradients land in param.grad()

  bool ok = same(compiled_loss, eager_loss, "loss");
  const auto eager_params = eager->named_parameters();
  for (const auto& p : compiled_net->named_parameters())
    ok &= same(p.value().grad(), eager_params[p.key()].grad(), "gradient of " + p.key());
  eager_opt.step();
  compiled_opt.step();
  for (const auto& p : compiled_net->named_parameters())
    ok &= same(p.value(), eager_params[p.key()], "updated " + p.key());
  // BatchNorm's running statistics were updated in the module's own buffers, as in eager.
  const auto eager_buffers = eager->named_buffers();
  for (const auto& b : compiled_net->named_buffers())
    ok &= same(b.value().to(at::kDouble), eager_buffers[b.key()].to(at::kDouble), "buffer " + b.key());

  // Which graph input is which parameter or buffer, which output updates which buffer.
  std::cout << aotpipe::to_json(aotpipe::graph_signature(compiled, {images, labels}, /*loss_index=*/0)) << "\n";
  std::cout << (ok ? "aot_module matches eager\n" : "aot_module differs from eager\n");
  return ok ? 0 : 1;
}
