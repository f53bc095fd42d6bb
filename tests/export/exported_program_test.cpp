// The example models of examples/pt2/ (real nn.Modules exported by export_models.py, both the
// training IR and the core-ATen IR of run_decompositions()), loaded from C++ and run eagerly and
// compiled: outputs, parameter gradients and buffers after one step equal eager PyTorch's, and
// the compiled graph signature equals, kind by kind, the one torch.export wrote.
#include "pt2_test_support.h"

#include <aotpipe/export/compiled_exported_program.h>
#include <aotpipe/export/exported_program.h>
#include <aotpipe/graph/grad_mode_region.h>
#include <aotpipe/runtime/graph_function.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <torch/autograd.h>
#include <torch/torch.h>

#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <string>

namespace aotpipe {
namespace {

using testing::EagerStep;
using testing::pt2_dir;

struct Case {
  std::string model;
  std::string variant;  // "" (training IR) or ".aten" (core ATen IR)
  std::string file() const { return model + variant + ".pt2"; }
};

std::string case_name(const ::testing::TestParamInfo<Case>& info) {
  return info.param.model + (info.param.variant.empty() ? "_training_ir" : "_aten_ir");
}

const char* const kModels[] = {"resnet_bn_train",       "gpt_block_loss",   "lstm_tagger",       "unet_decoder_block",
                               "buffer_mutation_const", "eval_classifier",  "dynamic_mlp",       "no_grad_region",
                               "tied_lm_head",          "autocast_regions", "vit_encoder_block", "activation_formulas"};

// Every archive of every model (no_grad_region has no core-ATen archive: see export_models.py).
std::vector<Case> all_cases() {
  std::vector<Case> cases;
  for (const char* model : kModels)
    for (const char* variant : {"", ".aten"})
      if (std::filesystem::exists(pt2_dir() / (std::string(model) + variant + ".pt2")))
        cases.push_back({model, variant});
  return cases;
}

// The archives whose model also has a core-ATen archive: the reference of the signature test.
std::vector<Case> cases_with_aten_reference() {
  std::vector<Case> cases;
  for (const Case& c : all_cases())
    if (std::filesystem::exists(pt2_dir() / (c.model + ".aten.pt2"))) cases.push_back(c);
  return cases;
}

void check_step(const ExportedProgram& program, const std::function<TensorList(const TensorList&)>& call,
                const EagerStep& expected, const std::string& label) {
  testing::check_eager_step(program.parameters(), program.buffers(), call, expected, label);
}

class ExportedProgramTest : public ::testing::TestWithParam<Case> {};

TEST_P(ExportedProgramTest, EagerCallMatchesPyTorch) {
  const Case& c = GetParam();
  ExportedProgram program = load_exported_program(pt2_dir() / c.file());
  check_step(
      program, [&](const TensorList& in) { return program(in); }, testing::load_eager_step(c.model),
      c.file() + " eager");
}

TEST_P(ExportedProgramTest, CompiledMatchesPyTorch) {
  const Case& c = GetParam();
  const EagerStep expected = testing::load_eager_step(c.model);
  ExportedProgram program = load_exported_program(pt2_dir() / c.file());
  CompiledExportedProgram compiled = compile_exported_program(program);
  check_step(
      program, [&](const TensorList& in) { return compiled(in); }, expected, c.file() + " compiled");
  EXPECT_EQ(compiled.num_compiled(), 1u);
  // The compile is a real one: a training step has a backward graph, inference has none.
  std::shared_ptr<const CompileState> state;
  {
    std::optional<torch::NoGradGuard> no_grad;
    if (!expected.training) no_grad.emplace();
    state = compiled.compiled_state(expected.inputs);
  }
  EXPECT_EQ(state->function.needs_autograd, expected.training) << c.file();
  // Truly fake: no op of these models ran on the CPU fallback at compile time (issue 15).
  for (const auto& [op, calls] : state->cpu_fallbacks)
    ADD_FAILURE() << c.file() << ": " << op << " ran " << calls << " times on the CPU fallback";
}

// The compiled signature against what torch.export wrote for the functional (core ATen) program:
// the same input specs (kind, FQN, persistence) and output specs (kind, target) in the same order,
// plus, for a training compile, one GRADIENT_TO_PARAMETER per parameter.
class CompiledSignatureTest : public ::testing::TestWithParam<Case> {};

TEST_P(CompiledSignatureTest, MatchesTorchExport) {
  const Case& c = GetParam();
  const EagerStep expected = testing::load_eager_step(c.model);
  ExportedProgram program = load_exported_program(pt2_dir() / c.file());
  const ExportGraphSignature written = load_exported_program(pt2_dir() / (c.model + ".aten.pt2")).signature();
  CompiledExportedProgram compiled = compile_exported_program(program);
  std::optional<torch::NoGradGuard> no_grad;
  if (!expected.training) no_grad.emplace();
  const ExportGraphSignature sig = compiled.graph_signature(expected.inputs);

  ASSERT_EQ(sig.input_specs.size(), written.input_specs.size());
  for (std::size_t i = 0; i < sig.input_specs.size(); ++i) {
    EXPECT_EQ(sig.input_specs[i].kind, written.input_specs[i].kind) << "input " << i;
    EXPECT_EQ(sig.input_specs[i].target, written.input_specs[i].target) << "input " << i;
    EXPECT_EQ(sig.input_specs[i].persistent, written.input_specs[i].persistent) << "input " << i;
  }
  std::vector<signature::OutputSpec> forward, gradients;
  for (const auto& spec : sig.output_specs)
    (spec.kind == signature::OutputKind::GradientToParameter ? gradients : forward).push_back(spec);
  ASSERT_EQ(forward.size(), written.output_specs.size());
  for (std::size_t k = 0; k < forward.size(); ++k) {
    EXPECT_EQ(forward[k].kind, written.output_specs[k].kind) << "output " << k;
    EXPECT_EQ(forward[k].target, written.output_specs[k].target) << "output " << k;
  }
  EXPECT_EQ(gradients.size(), expected.training ? program.parameters().size() : 0u);
  for (std::size_t g = 0; g < gradients.size(); ++g) EXPECT_EQ(*gradients[g].target, program.parameters()[g].name);
}

INSTANTIATE_TEST_SUITE_P(Pt2Examples, ExportedProgramTest, ::testing::ValuesIn(all_cases()), case_name);
INSTANTIATE_TEST_SUITE_P(Pt2Examples, CompiledSignatureTest, ::testing::ValuesIn(cases_with_aten_reference()),
                         case_name);

TEST(ExportedProgramCases, EveryModelIsTested) {
  EXPECT_EQ(all_cases().size(), 2 * std::size(kModels) - 1);  // all but no_grad_region have two archives
}

// A `with torch.no_grad():` block of the training IR is inlined with every node of it marked to
// run with grad off (graph/grad_mode_region.h), visible in the graph; no operand is detached.
TEST(ExportedProgramLoad, GradModeRegionRunsWithGradOff) {
  ExportedProgram program = load_exported_program(pt2_dir() / "no_grad_region.pt2");
  std::size_t in_region = 0;
  for (const Node* node : program.graph().nodes()) {
    if (!node->is_call()) continue;
    EXPECT_NE(node->qualified_name(), "aten::detach");
    if (grad_mode_region_of(*node) == std::optional<bool>(false)) ++in_region;
  }
  EXPECT_GT(in_region, 0u);
}

// In-place ops under no_grad (tests/export/fixtures/export_fixtures.py: a clamp_ of a value read
// with grad after it, and of a parameter) leave both tensors' history as it was: outputs,
// gradients and the parameter as eager's, run as exported and compiled.
TEST(ExportedProgramLoad, InPlaceOpsUnderNoGradLeaveTheHistory) {
  const auto fixtures = testing::data_dependent_dir().parent_path() / "fixtures";
  const EagerStep expected = testing::load_eager_step("no_grad_in_place", fixtures);
  {
    ExportedProgram program = load_exported_program(fixtures / "no_grad_in_place.pt2");
    check_step(
        program, [&](const TensorList& in) { return program(in); }, expected, "no_grad_in_place eager");
  }
  ExportedProgram program = load_exported_program(fixtures / "no_grad_in_place.pt2");
  CompiledExportedProgram compiled = compile_exported_program(program);
  check_step(
      program, [&](const TensorList& in) { return compiled(in); }, expected, "no_grad_in_place compiled");
}

// A program that mutates a buffer and returns it (tests/export/fixtures/export_fixtures.py): the
// caller gets the buffer itself, as ep.module() returns it, run as exported and compiled, from
// the training IR (where add_ runs on the buffer) and from the core ATen IR (whose graph returns
// the new value as the mutation and as the output).
TEST(ExportedProgramLoad, AReturnedMutatedBufferIsTheBufferItself) {
  const auto fixtures = testing::data_dependent_dir().parent_path() / "fixtures";
  for (const char* file : {"returns_its_buffer.pt2", "returns_its_buffer.aten.pt2"}) {
    for (const bool compiled : {false, true}) {
      ExportedProgram program = load_exported_program(fixtures / file);
      const at::Tensor total = program.buffers().at(0).tensor;
      std::optional<CompiledExportedProgram> compiled_program;
      if (compiled) compiled_program = compile_exported_program(program);
      auto call = [&](const at::Tensor& x) { return compiled ? (*compiled_program)({x}) : program({x}); };
      const std::string where = std::string(file) + (compiled ? " compiled" : " as exported");
      const TensorList first = call(at::ones({3}));
      EXPECT_TRUE(first[0].is_same(total)) << where;
      (void)call(at::ones({3}));
      EXPECT_TRUE(at::equal(first[0], at::full({3}, 2.0))) << where << ": the first output is the buffer, now 2";
      EXPECT_TRUE(at::equal(total, at::full({3}, 2.0))) << where;
    }
  }
}

TEST(ExportedProgramLoad, SignatureAndStateAsWritten) {
  ExportedProgram program = load_exported_program(pt2_dir() / "buffer_mutation_const.pt2");
  EXPECT_EQ(program.dialect(), "TRAINING");
  EXPECT_EQ(program.name(), "buffer_mutation_const");
  using signature::InputKind;
  const auto& in = program.signature().input_specs;
  ASSERT_EQ(in.size(), 7u);
  EXPECT_EQ(in[0].kind, InputKind::Parameter);
  EXPECT_EQ(*in[0].target, "lin.weight");
  EXPECT_EQ(in[2].kind, InputKind::Buffer);
  EXPECT_EQ(*in[2].target, "steps");
  EXPECT_EQ(in[4].persistent, false);  // "mask": its bytes live in data/constants
  EXPECT_EQ(*in[4].target, "mask");
  EXPECT_EQ(in[5].kind, InputKind::ConstantTensor);
  EXPECT_EQ(*in[5].target, "scale");
  EXPECT_EQ(in[6].kind, InputKind::UserInput);
  ASSERT_EQ(program.constants().size(), 1u);
  EXPECT_TRUE(at::equal(program.constants()[0].tensor, torch::tensor({0.5f, 1.0f, 1.5f, 2.0f, 2.5f, 3.0f})));
  EXPECT_TRUE(at::equal(program.buffers()[2].tensor, torch::tensor({0.f, 1.f, 0.f, 1.f, 0.f, 1.f})));
  for (const NamedTensor& p : program.parameters()) {
    EXPECT_TRUE(p.tensor.requires_grad()) << p.name;
    EXPECT_TRUE(p.tensor.is_leaf()) << p.name;
  }
  ASSERT_TRUE(program.sample_inputs());
  EXPECT_EQ(program.sample_inputs()->at(0).sizes(), (std::vector<int64_t>{5, 6}));
  // In the graph, each node is the overload the export recorded (training IR keeps add_).
  bool has_add_ = false;
  for (const Node* node : program.graph().nodes())
    if (node->is_call() && node->qualified_name() == "aten::add_.Tensor") has_add_ = true;
  EXPECT_TRUE(has_add_);
}

// Loaded for a GPU (this machine need not have one): values and inputs name cuda:0, but a Python
// scalar the export passed for a Tensor parameter (`mul_(0.9)`) stays a CPU wrapped number, as in
// eager, and the graph built at load is the one a first call at the sample sizes uses (so no
// call, perhaps a trace, builds and caches another).
TEST(ExportedProgramLoad, ForCudaScalarsStayOnTheCpuAndTheLoadedGraphIsReused) {
  LoadExportedProgramOptions options;
  options.device = c10::Device("cuda:0");
  ExportedProgram program = load_exported_program(pt2_dir() / "no_grad_region.pt2", options);
  const Graph& graph = program.graph();
  for (const Value* input : graph.inputs()) EXPECT_TRUE(input->meta()->device.is_cuda()) << input->name();
  std::size_t scalars = 0;
  for (const Node* node : graph.nodes()) {
    if (node->is_call()) continue;
    const at::Tensor& constant = graph.tensor_constants().at(node->constant_name());
    EXPECT_TRUE(constant.is_cpu()) << node->constant_name();
    EXPECT_TRUE(constant.unsafeGetTensorImpl()->is_wrapped_number()) << node->constant_name();
    EXPECT_TRUE(node->output()->meta()->device.is_cpu()) << node->output()->name();
    ++scalars;
  }
  EXPECT_EQ(scalars, 1u);  // mul_'s 0.9
  ASSERT_TRUE(program.sample_inputs());
  EXPECT_EQ(program.graph_for(*program.sample_inputs()).get(), &graph);
}

// A tied parameter is one tensor under each of its names (one leaf, one .grad), as in eager;
// CompiledMatchesPyTorch checks that the .grad is the sum over both uses.
TEST(ExportedProgramLoad, TiedParametersAreOneTensorUnderEachName) {
  ExportedProgram program = load_exported_program(pt2_dir() / "tied_lm_head.pt2");
  std::map<std::string, at::Tensor> by_name;
  for (const NamedTensor& p : program.parameters()) by_name[p.name] = p.tensor;
  ASSERT_TRUE(by_name.count("embed.weight") && by_name.count("decoder.weight"));
  EXPECT_TRUE(by_name["embed.weight"].is_same(by_name["decoder.weight"]));
  EXPECT_TRUE(by_name["bias"].is_same(by_name["decoder.bias"]));
  EXPECT_FALSE(by_name["proj.weight"].is_same(by_name["embed.weight"]));
  // On another device too (here the CPU stands in when the machine has no GPU).
  ExportedProgram moved = load_exported_program(pt2_dir() / "tied_lm_head.pt2", {.device = c10::Device("cuda:0")});
  const TensorList lifted = moved.lifted_tensors();
  std::set<const c10::TensorImpl*> distinct;
  for (const at::Tensor& t : lifted) distinct.insert(t.unsafeGetTensorImpl());
  EXPECT_EQ(distinct.size(), lifted.size() - 2);
}

// Nodes of a torch.autocast region carry its state; the compiled graphs hold the casts eager's
// autocast makes (CompiledMatchesPyTorch checks the values).
TEST(ExportedProgramLoad, AutocastRegionsRunUnderTheirState) {
  ExportedProgram program = load_exported_program(pt2_dir() / "autocast_regions.pt2");
  std::map<std::string, std::size_t> regions;
  for (const Node* node : program.graph().nodes())
    if (auto it = node->attrs().find("autocast"); it != node->attrs().end()) ++regions[it->second];
  EXPECT_GT(regions["cpu,BFloat16"], 0u);
  EXPECT_GT(regions["cpu,off"], 0u);
  EXPECT_EQ(regions.size(), 2u);
  CompiledExportedProgram compiled = compile_exported_program(program);
  const auto state = compiled.compiled_state(*program.sample_inputs());
  ASSERT_TRUE(state->partition);
  std::size_t to_bf16 = 0;
  for (const Node* node : state->partition->forward.nodes())
    if (node->is_call() && node->qualified_name() == "aten::_to_copy" && node->output()->meta() &&
        node->output()->meta()->dtype == c10::kBFloat16)
      ++to_bf16;
  EXPECT_GE(to_bf16, 4u);  // lin1's input, weight, bias; lin2's weight and bias
}

// How many calls of each op in `graph`, for the ops named.
std::map<std::string, std::size_t> count_calls(const Graph& graph, const std::set<std::string>& ops) {
  std::map<std::string, std::size_t> counts;
  for (const Node* node : graph.nodes())
    if (node->is_call() && ops.contains(node->qualified_name())) ++counts[node->qualified_name()];
  return counts;
}

// The activation formulas of activation_formulas.pt2 compile as ATen's kernels, forward and
// backward (CompiledMatchesPyTorch checks the step's numbers); the program's own graph, and a
// compile asked not to, keep them as written. The last formula's tanh is read twice: it stays.
TEST(ExportedProgramLoad, ActivationFormulasCompileAsTheirKernels) {
  const std::set<std::string> ops = {
      "aten::tanh", "aten::erf",           "aten::sigmoid",       "aten::gelu",
      "aten::silu", "aten::gelu_backward", "aten::silu_backward", "aten::pow.Tensor_Scalar"};
  for (const char* variant : {"", ".aten"}) {
    const auto path = pt2_dir() / (std::string("activation_formulas") + variant + ".pt2");
    ExportedProgram program = load_exported_program(path);
    using Counts = std::map<std::string, std::size_t>;
    EXPECT_EQ(count_calls(program.graph(), ops),
              (Counts{{"aten::tanh", 3}, {"aten::erf", 1}, {"aten::sigmoid", 1}, {"aten::pow.Tensor_Scalar", 2}}))
        << path;
    const auto inputs = *program.sample_inputs();
    const auto fused = compile_exported_program(program).compiled_state(inputs);
    ASSERT_TRUE(fused->partition) << path;
    EXPECT_EQ(count_calls(fused->partition->forward, ops),
              (Counts{{"aten::tanh", 1}, {"aten::gelu", 3}, {"aten::silu", 1}, {"aten::pow.Tensor_Scalar", 1}}))
        << path;
    const Counts backward = count_calls(fused->partition->backward, ops);
    EXPECT_EQ(backward.at("aten::gelu_backward"), 3u) << path;
    EXPECT_EQ(backward.at("aten::silu_backward"), 1u) << path;
    EXPECT_FALSE(backward.contains("aten::erf")) << path;

    ExportedProgram as_exported = load_exported_program(path, {.fuse_formulas = false});
    const auto unfused = compile_exported_program(as_exported).compiled_state(inputs);
    const Counts forward = count_calls(unfused->partition->forward, ops);
    EXPECT_EQ(forward.at("aten::tanh"), 3u) << path;
    EXPECT_FALSE(forward.contains("aten::gelu")) << path;
  }
}

// torchvision's ViT block exported on the CPU: the head merge after attention is a view there
// and not on another device; loaded for cuda:0 it becomes reshape and compiles (no GPU needed).
TEST(ExportedProgramLoad, ForCudaAViewOnlyTheCpuAllowedBecomesReshapeAndCompiles) {
  ExportedProgram program =
      load_exported_program(pt2_dir() / "vit_encoder_block.pt2", {.device = c10::Device("cuda:0")});
  for (const Node* node : program.graph().nodes())
    EXPECT_FALSE(node->is_call() && node->qualified_name() == "aten::view") << node->label();
  AotConfig config;
  config.num_params_buffers = program.lifted_tensors().size();
  const CompileOutput out =
      compile(program.name(), program.flat_function(), metadata_example_args(program.graph()), config);
  ASSERT_TRUE(out.state()->partition);
  for (const Value* input : out.state()->partition->forward.inputs()) EXPECT_TRUE(input->meta()->device.is_cuda());
}

// ---- symbolic dimensions ---------------------------------------------------------------------

TEST(ExportedProgramDynamic, EachSizeCompilesOnceWithinItsRange) {
  ExportedProgram program = load_exported_program(pt2_dir() / "dynamic_mlp.pt2");
  ASSERT_EQ(program.symbolic_dims().size(), 1u);
  EXPECT_EQ(program.symbolic_dims()[0].min, 2);
  EXPECT_EQ(program.symbolic_dims()[0].max, 64);
  CompiledExportedProgram compiled = compile_exported_program(program);
  for (int64_t batch : {4, 9, 64, 9}) {
    at::Tensor x = torch::randn({batch, 8});
    TensorList eager = program({x});
    TensorList out = compiled({x});
    ASSERT_EQ(out[0].sizes(), (std::vector<int64_t>{batch, 2, 2}));
    EXPECT_TRUE(at::allclose(out[0], eager[0], 1e-5, 1e-6)) << batch;
  }
  EXPECT_EQ(compiled.num_compiled(), 3u);  // 4, 9 and 64: one compile per size
}

TEST(ExportedProgramDynamic, SizesOutsideTheExportAreNamed) {
  ExportedProgram program = load_exported_program(pt2_dir() / "dynamic_mlp.aten.pt2");
  CompiledExportedProgram compiled = compile_exported_program(program);
  auto message = [&](at::Tensor x) -> std::string {
    try {
      compiled({x});
    } catch (const Pt2Error& e) { return e.what(); }
    return "no error";
  };
  EXPECT_THAT(message(torch::randn({80, 8})),
              ::testing::HasSubstr("user input 0 ('x') dimension 0 is 80, outside the range [2, 64]"));
  EXPECT_THAT(message(torch::randn({1, 8})), ::testing::HasSubstr("dimension 0 is 1, outside the range [2, 64]"));
  EXPECT_THAT(message(torch::randn({4, 7})), ::testing::HasSubstr("dimension 1 is 7; the export fixed it at 8"));
  EXPECT_THAT(message(torch::randn({4, 8, 1})), ::testing::HasSubstr("has 3 dimensions; the export has 2"));
  EXPECT_EQ(compiled.num_compiled(), 0u);
}

}  // namespace
}  // namespace aotpipe
