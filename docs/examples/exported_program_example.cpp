// A PyTorch model exported with torch.export (examples/pt2/resnet_bn_train.pt2, a ResNet with
// BatchNorm in training mode), loaded and trained from C++ with no Python: one SGD step through
// the compiled program and the same step through the program run eagerly, from two loads of the
// archive; the loss, the parameters after the step and BatchNorm's running statistics must agree.
// Prints the compile's graph signature. Returns non-zero on a mismatch. See docs/export.md.
#include <aotpipe/aotpipe.h>

#include <torch/torch.h>

#include <iostream>

int main(int argc, char** argv) {
  const std::string path = argc > 1 ? argv[1] : "examples/pt2/resnet_bn_train.pt2";
  aotpipe::ExportedProgram eager = aotpipe::load_exported_program(path);
  aotpipe::CompiledExportedProgram compiled =
      aotpipe::compile_exported_program(aotpipe::load_exported_program(path));

  // The archive's sample inputs: a batch of 4 images of 3x16x16.
  const at::Tensor images = eager.sample_inputs()->at(0);
  const at::Tensor labels = torch::randint(0, 10, {4});
  auto parameters = [](const aotpipe::ExportedProgram& program) {
    std::vector<at::Tensor> tensors;
    for (const aotpipe::NamedTensor& p : program.parameters()) tensors.push_back(p.tensor);
    return tensors;
  };
  torch::optim::SGD eager_opt(parameters(eager), 0.1);
  torch::optim::SGD compiled_opt(parameters(compiled.program()), 0.1);

  at::Tensor eager_loss = torch::nn::functional::cross_entropy(eager({images})[0], labels);
  at::Tensor compiled_loss = torch::nn::functional::cross_entropy(compiled({images})[0], labels);  // compiles
  eager_loss.backward();
  compiled_loss.backward();  // parameters are leaves: their .grad() is filled
  eager_opt.step();
  compiled_opt.step();

  bool ok = at::allclose(eager_loss, compiled_loss, 1e-4, 1e-5);
  for (std::size_t i = 0; i < eager.parameters().size(); ++i)
    ok &= at::allclose(eager.parameters()[i].tensor, compiled.program().parameters()[i].tensor, 1e-4, 1e-5);
  for (std::size_t i = 0; i < eager.buffers().size(); ++i)  // running_mean/var, num_batches_tracked
    ok &= at::allclose(eager.buffers()[i].tensor, compiled.program().buffers()[i].tensor, 1e-4, 1e-5);

  std::cout << "loss " << compiled_loss.item<float>() << ", " << (ok ? "matches" : "DIFFERS FROM")
            << " the program run eagerly\n"
            << aotpipe::to_json(compiled.graph_signature({images})) << "\n";
  return ok ? 0 : 1;
}
