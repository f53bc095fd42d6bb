// Peak CPU memory of a training step: the compiled program never holds more at once than the
// exported program run eagerly (autograd's graph, each node's saved tensors freed after it runs),
// measured by tools/memory_meter on the example archives of examples/pt2/.
//
// What this guards: the context's saved tensors are released before the compiled backward runs
// (PyTorch's maybe_clear_saved_tensors), the backward gets zero tangents only where its graph
// takes them (not for every mutated buffer), BatchNorm's backward does not keep the updated
// running statistics alive, and re-inplaced gradient sums.
#include "pt2_test_support.h"

#include <aotpipe/export/compiled_exported_program.h>
#include <aotpipe/export/exported_program.h>

#include <cpu_memory_meter.h>
#include <gtest/gtest.h>
#include <torch/autograd.h>

#include <string>

namespace aotpipe {
namespace {

using testing::pt2_dir;

// The most bytes one step holds at once beyond what was live before it: forward, backward with
// the recorded gradients, .grad reset.
std::int64_t step_peak(const ExportedProgram& program, const std::function<TensorList(const TensorList&)>& call,
                       const testing::EagerStep& step) {
  return peak_cpu_bytes([&] {
    const TensorList outputs = call(step.inputs);
    TensorList differentiable, seeds;
    for (std::size_t i = 0; i < outputs.size() && i < step.grad_outputs.size(); ++i)
      if (outputs[i].requires_grad()) {
        differentiable.push_back(outputs[i]);
        seeds.push_back(step.grad_outputs[i]);
      }
    torch::autograd::backward(differentiable, seeds);
    for (const NamedTensor& p : program.parameters()) p.tensor.mutable_grad().reset();
  });
}

class PeakMemoryTest : public ::testing::TestWithParam<std::string> {
 protected:
  static void SetUpTestSuite() { ASSERT_TRUE(aotpipe_meter_install()) << "the CPU memory meter is not installed"; }
};

TEST_P(PeakMemoryTest, CompiledTrainingStepHoldsNoMoreThanEager) {
  const std::string& model = GetParam();
  const testing::EagerStep step = testing::load_eager_step(model);
  ASSERT_TRUE(step.training) << model << " records no training step";
  ExportedProgram eager = load_exported_program(pt2_dir() / (model + ".pt2"));
  ExportedProgram program = load_exported_program(pt2_dir() / (model + ".pt2"));
  CompiledExportedProgram compiled = compile_exported_program(program);
  compiled.compiled_state(step.inputs);  // the compile's own allocations are not the step's
  const auto eager_call = [&](const TensorList& in) { return eager(in); };
  const auto compiled_call = [&](const TensorList& in) { return compiled(in); };
  step_peak(eager, eager_call, step);  // first calls: lazily made state is not a step's either
  step_peak(program, compiled_call, step);
  const std::int64_t eager_peak = step_peak(eager, eager_call, step);
  const std::int64_t compiled_peak = step_peak(program, compiled_call, step);
  EXPECT_GT(eager_peak, 0);
  EXPECT_LE(compiled_peak, eager_peak) << model << ": compiled step peak " << compiled_peak << " bytes, eager "
                                       << eager_peak;
  RecordProperty("eager_peak_bytes", std::to_string(eager_peak));
  RecordProperty("compiled_peak_bytes", std::to_string(compiled_peak));
}

INSTANTIATE_TEST_SUITE_P(Examples, PeakMemoryTest,
                         ::testing::Values("resnet_bn_train", "gpt_block_loss", "lstm_tagger", "unet_decoder_block",
                                           "buffer_mutation_const", "tied_lm_head", "autocast_regions",
                                           "vit_encoder_block"));

}  // namespace
}  // namespace aotpipe
