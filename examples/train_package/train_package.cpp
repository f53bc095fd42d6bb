// train_package: trains a model from C++ through a package (.aotpkg), with torch::optim::AdamW
// and no compiler in the process: this program links aotpipe::package (the runtime) and
// libtorch, not the tracer, the stages or the pipeline.
//
//   aotpipe compile model.pt2 --package model.aotpkg      # once, where the compiler is
//   train_package model.aotpkg batches.pt losses.json     # anywhere
//
// model.pt2 exports a module whose first output is the loss. batches.pt is a torch.save'd dict:
// "batches" (a list of steps, each the list of the program's user inputs), "lr" and
// "weight_decay". Each step: zero the gradients, call, backward, AdamW step. The loss of every
// step goes to losses.json ({"losses": [...]}), and to stdout as a curve.
#include <aotpipe/package/load_package.h>

#include <torch/csrc/jit/serialization/pickle.h>
#include <torch/optim/adamw.h>
#include <torch/torch.h>

#include <chrono>
#include <cstdio>
#include <exception>
#include <fstream>
#include <iterator>
#include <vector>

namespace {

struct Batches {
  std::vector<std::vector<at::Tensor>> steps;
  double lr = 1e-3;
  double weight_decay = 1e-2;
};

Batches read_batches(const char* path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error(std::string("cannot open ") + path);
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const c10::Dict<c10::IValue, c10::IValue> dict = torch::jit::pickle_load(bytes).toGenericDict();
  Batches batches;
  for (const c10::IValue& step : dict.at("batches").toListRef()) {
    std::vector<at::Tensor> inputs;
    for (const c10::IValue& t : step.toListRef()) inputs.push_back(t.toTensor());
    batches.steps.push_back(std::move(inputs));
  }
  batches.lr = dict.at("lr").toDouble();
  batches.weight_decay = dict.at("weight_decay").toDouble();
  return batches;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: %s MODEL.aotpkg BATCHES.pt LOSSES.json\n", argv[0]);
    return 2;
  }
  try {
    const auto start = std::chrono::steady_clock::now();
    const aotpipe::PackagedProgram model = aotpipe::load_package(argv[1]);
    const Batches batches = read_batches(argv[2]);
    torch::optim::AdamW optimizer(model.parameter_tensors(),
                                  torch::optim::AdamWOptions(batches.lr).weight_decay(batches.weight_decay));
    std::vector<double> losses;
    for (const std::vector<at::Tensor>& inputs : batches.steps) {
      optimizer.zero_grad();
      const at::Tensor loss = model(inputs).at(0);
      loss.backward();
      optimizer.step();
      losses.push_back(loss.item<double>());
      std::printf("step %2zu  loss %.6f\n", losses.size(), losses.back());
    }
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::printf("%zu steps of %s in %.2f s (load included)\n", losses.size(), model.name().c_str(), seconds);
    std::FILE* out = std::fopen(argv[3], "w");
    if (!out) throw std::runtime_error(std::string("cannot write ") + argv[3]);
    std::fprintf(out, "{\"losses\": [");
    for (std::size_t i = 0; i < losses.size(); ++i) std::fprintf(out, "%s%.9g", i ? ", " : "", losses[i]);
    std::fprintf(out, "]}\n");
    std::fclose(out);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "train_package: %s\n", e.what());
    return 1;
  }
}
