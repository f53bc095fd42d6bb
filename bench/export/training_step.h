#pragma once
// One training step of a loaded exported program, as the zoo and GPU step benchmarks time it.
#include <aotpipe/export/exported_program.h>

#include <ATen/ops/ones_like.h>
#include <torch/csrc/autograd/autograd.h>

#include <functional>
#include <stdexcept>

namespace aotpipe::bench {

// The call, a backward with one fixed gradient per differentiable output, and .grad reset (as
// zero_grad(set_to_none=True)) so steps do not accumulate. The gradients are made at the first
// step and kept, as the Python eager steps keep their own: a step's memory is the model's, not
// its seeds'.
struct TrainingStep {
  std::function<TensorList(const TensorList&)> call;
  const ExportedProgram* program;
  TensorList inputs;
  mutable TensorList seeds;
  void operator()() const {
    const TensorList outputs = call(inputs);
    TensorList differentiable;
    for (const at::Tensor& o : outputs)
      if (o.requires_grad()) differentiable.push_back(o);
    if (seeds.empty())
      for (const at::Tensor& o : differentiable) seeds.push_back(at::ones_like(o));
    if (!differentiable.empty()) torch::autograd::backward(differentiable, seeds);
    for (const NamedTensor& p : program->parameters()) p.tensor.mutable_grad().reset();
  }
};

inline TensorList sample_inputs(const ExportedProgram& program) {
  if (!program.sample_inputs()) throw std::runtime_error(program.name() + ": the archive has no sample inputs");
  return *program.sample_inputs();
}

}  // namespace aotpipe::bench
