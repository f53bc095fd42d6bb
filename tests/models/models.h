#pragma once
// Small real models written in functional form (parameters and buffers are inputs), for the
// end-to-end test of aot_function against eager: an MLP, a conv net with BatchNorm in training
// mode (running statistics mutated in place), a pre-LN transformer block and an LSTM cell.
#include <aotpipe/stages/metadata/collect_metadata.h>

#include <functional>
#include <string>
#include <vector>

namespace aotpipe::testing {

struct ModelCase {
  std::string name;
  Function fn;
  // Fresh inputs at every call; random (the caller seeds the generator), parameters are leaves
  // that require grad.
  std::function<TensorList()> make_inputs;
  // Indices of inputs the model updates in place (BatchNorm running statistics): the test also
  // checks these really changed, so a compiled function that drops the mutation cannot pass on
  // inputs that happen to be unchanged.
  std::vector<std::size_t> mutated_inputs;
};

const std::vector<ModelCase>& model_cases();

}  // namespace aotpipe::testing
