// Programs with data-dependent sizes (torch.export's unbacked u0, u1, ...): a mixture of experts
// routed as transformers' Mixtral block routes (tests/export/data_dependent/moe_routing*.pt2,
// written by examples/pt2/export_models.py). Loaded from C++, the program runs as exported with
// autograd: its training step equals eager PyTorch's, and on other inputs (other routings, an
// expert with no token) it equals a dense evaluation of the same mixture. Compiled, its regions of
// known sizes are compiled and the rest runs as exported, with the same results; a compile as one
// graph (flat_function) is refused naming the symbols and the node that returns the first.
#include "pt2_test_support.h"

#include <aotpipe/export/compiled_exported_program.h>
#include <aotpipe/export/exported_program.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <torch/autograd.h>
#include <torch/torch.h>

#include <filesystem>
#include <map>
#include <string>
#include <vector>

namespace aotpipe {
namespace {

using nlohmann::json;
using ::testing::AllOf;
using testing::data_dependent_dir;
using ::testing::HasSubstr;

constexpr int64_t kExperts = 4;
constexpr int64_t kTopK = 2;

class DataDependentTest : public ::testing::TestWithParam<std::string> {  // "" or ".aten"
 protected:
  std::string file() const { return "moe_routing" + GetParam() + ".pt2"; }
  ExportedProgram load() const { return load_exported_program(data_dependent_dir() / file()); }
};

std::string variant_name(const ::testing::TestParamInfo<std::string>& info) {
  return info.param.empty() ? "training_ir" : "aten_ir";
}

TEST_P(DataDependentTest, LoadsNamingItsDataDependentSizes) {
  const ExportedProgram program = load();
  std::vector<std::string> symbols;
  for (const SymbolicDim& dim : program.data_dependent_dims()) {
    symbols.push_back(dim.symbol);
    EXPECT_EQ(dim.min, 0) << dim.symbol;
    EXPECT_EQ(dim.max, 20) << dim.symbol;  // 10 tokens x top-2 slots: the routing mask's size
  }
  EXPECT_EQ(symbols, (std::vector<std::string>{"u0", "u1", "u2", "u3"}));
  EXPECT_TRUE(program.symbolic_dims().empty());
  // Each expert's tokens have no size until the program runs: the results of its torch.where
  // (aten::where in the training IR, aten::nonzero after decompositions) have no metadata.
  std::size_t routing_calls = 0;
  for (const Node* node : program.graph().nodes()) {
    if (!node->is_call() || (node->qualified_name() != "aten::where" && node->qualified_name() != "aten::nonzero"))
      continue;
    ++routing_calls;
    for (const Value* out : node->outputs()) EXPECT_EQ(out->meta(), nullptr) << out->name();
  }
  EXPECT_EQ(routing_calls, static_cast<std::size_t>(kExperts));
}

TEST_P(DataDependentTest, RunsAsExportedAndMatchesPyTorch) {
  const ExportedProgram program = load();
  testing::check_eager_step(
      program.parameters(), program.buffers(), [&](const TensorList& in) { return program(in); },
      testing::load_eager_step("moe_routing", data_dependent_dir()), file() + " eager");
}

// The mixture evaluated densely from the program's parameters: every expert on every token,
// weighted by its renormalized router weight where the token routes to it and by zero elsewhere.
at::Tensor dense_mixture(const std::map<std::string, at::Tensor>& p, const at::Tensor& x) {
  auto [top, chosen] = at::topk(at::softmax(at::linear(x, p.at("gate.weight")), -1), kTopK, -1);
  top = top / top.sum(-1, /*keepdim=*/true);
  at::Tensor out = at::zeros_like(x);
  for (int64_t e = 0; e < kExperts; ++e) {
    const std::string prefix = "experts." + std::to_string(e) + ".";
    const at::Tensor hidden = at::silu(at::linear(x, p.at(prefix + "0.weight"), p.at(prefix + "0.bias")));
    const at::Tensor y = at::linear(hidden, p.at(prefix + "2.weight"), p.at(prefix + "2.bias"));
    out = out + y * (top * chosen.eq(e)).sum(-1, /*keepdim=*/true);
  }
  return out;
}

// Routings the export never saw, each expert's token count another value of u0..u3, one with two
// experts that no token routes to (every token the same): outputs and every parameter's gradient
// equal the dense evaluation's, as exported and compiled in regions.
TEST_P(DataDependentTest, EveryRoutingMatchesTheDenseMixture) {
  const ExportedProgram program = load();
  const CompiledExportedProgram compiled = compile_exported_program(program);
  std::map<std::string, at::Tensor> reference;  // leaves of their own, for the dense gradients
  for (const NamedTensor& p : program.parameters()) reference[p.name] = p.tensor.detach().clone().requires_grad_(true);
  const at::Tensor same_token = at::randn({1, 8}, at::TensorOptions().dtype(at::kFloat)).expand({10, 8}).contiguous();
  std::vector<at::Tensor> inputs = {same_token};
  for (int seed = 1; seed <= 3; ++seed) {
    at::manual_seed(seed);
    inputs.push_back(at::randn({10, 8}) * 3);
  }
  for (std::size_t run = 0; run < 2 * inputs.size(); ++run) {
    const std::size_t i = run % inputs.size();
    const bool as_exported = run < inputs.size();
    const std::string label =
        file() + (as_exported ? " as exported" : " compiled in regions") + ", input " + std::to_string(i);
    for (const NamedTensor& p : program.parameters()) p.tensor.mutable_grad() = at::Tensor();
    for (auto& [name, t] : reference) t.mutable_grad() = at::Tensor();
    const at::Tensor out = (as_exported ? program({inputs[i]}) : compiled({inputs[i]})).at(0);
    const at::Tensor expected = dense_mixture(reference, inputs[i]);
    testing::expect_close(out.detach(), expected.detach(), label + " output");
    const at::Tensor seed = at::randn(out.sizes());
    torch::autograd::backward({out}, {seed});
    torch::autograd::backward({expected}, {seed});
    for (const NamedTensor& p : program.parameters()) {
      const at::Tensor& dense = reference.at(p.name).grad();
      ASSERT_TRUE(dense.defined()) << label << ": " << p.name;
      // The program leaves none only where the dense gradient is zero: an expert no token routes
      // to, whose layers never ran.
      testing::expect_close(p.tensor.grad().defined() ? p.tensor.grad() : at::zeros_like(dense), dense,
                            label + " grad " + p.name);
    }
  }
  // The identical tokens route to the same two experts: the other two get no token (u = 0).
  const at::Tensor x = inputs[0];
  auto chosen = std::get<1>(at::topk(at::linear(x, reference.at("gate.weight")), kTopK, -1));
  EXPECT_EQ(at::bincount(chosen.flatten(), {}, kExperts).eq(0).sum().item<int64_t>(), kExperts - kTopK);
}

// Symbolic arithmetic and checks on a data-dependent size (as a torch._check on `2 * u0` writes
// them), and a name a later node defines again with a known value: the program loads and runs
// as before, and the redefined name is a number again (a check that fails on it is reported).
TEST_P(DataDependentTest, ArithmeticOnDataDependentSizesLoads) {
  const std::filesystem::path edited =
      std::filesystem::path(::testing::TempDir()) / ("moe_routing_arith" + GetParam() + ".pt2");
  auto sym_node = [](const std::string& name, const std::string& target, json inputs, const char* kind) {
    return json{{"name", name},
                {"target", target},
                {"inputs", std::move(inputs)},
                {"outputs", json::array({json{{kind, {{"as_name", name}}}}})},
                {"metadata", json::object()}};
  };
  auto operand = [](const std::string& name, json arg) {
    return json{{"name", name}, {"arg", std::move(arg)}, {"kind", 1}};
  };
  // _assert_scalar(condition, message): a node without outputs.
  auto check_node = [&](const std::string& name, const std::string& condition, const std::string& message) {
    json node = sym_node(name, "torch.ops.aten._assert_scalar.default",
                         json::array({operand("self", {{"as_sym_bool", {{"as_name", condition}}}}),
                                      operand("assert_msg", {{"as_string", message}})}),
                         "as_none");
    node["outputs"] = json::array();
    return node;
  };
  auto edit = [&](bool failing_check) {
    return [&, failing_check](json& m) {
      json& nodes = m["graph_module"]["graph"]["nodes"];
      json added = json::array();
      std::string size;  // the first sym_size node's result (u0)
      for (const json& node : nodes)
        if (size.empty() && node["target"] == "torch.ops.aten.sym_size.int")
          size = node["outputs"][0]["as_sym_int"]["as_name"];
      ASSERT_FALSE(size.empty());
      added.push_back(
          sym_node("twice", "_operator.mul",
                   json::array({operand("a", {{"as_sym_int", {{"as_name", size}}}}), operand("b", {{"as_int", 2}})}),
                   "as_sym_int"));
      added.push_back(sym_node(
          "twice_le", "_operator.le",
          json::array({operand("a", {{"as_sym_int", {{"as_name", "twice"}}}}), operand("b", {{"as_int", 40}})}),
          "as_sym_bool"));
      added.push_back(check_node("check_twice", "twice_le", "2*u0 <= 40"));
      // `twice` again, now a known number, and a check on it.
      added.push_back(sym_node("twice", "_operator.mul",
                               json::array({operand("a", {{"as_int", 3}}), operand("b", {{"as_int", 2}})}),
                               "as_sym_int"));
      added.push_back(
          sym_node("twice_ok", failing_check ? "_operator.gt" : "_operator.eq",
                   json::array({operand("a", {{"as_sym_int", {{"as_name", "twice"}}}}), operand("b", {{"as_int", 6}})}),
                   "as_sym_bool"));
      added.push_back(check_node("check", "twice_ok", "twice is 6"));
      std::size_t at = 0;
      while (at < nodes.size() && nodes[at]["outputs"].dump().find("\"" + size + "\"") == std::string::npos) ++at;
      for (std::size_t k = 0; k < added.size(); ++k)
        nodes.insert(nodes.begin() + static_cast<std::ptrdiff_t>(at + 1 + k), added[k]);
    };
  };
  testing::rewrite_archive(data_dependent_dir() / file(), edited, edit(false));
  const ExportedProgram program = load_exported_program(edited);
  testing::check_eager_step(
      program.parameters(), program.buffers(), [&](const TensorList& in) { return program(in); },
      testing::load_eager_step("moe_routing", data_dependent_dir()), file() + " with arithmetic");

  testing::rewrite_archive(data_dependent_dir() / file(), edited, edit(true));
  std::string message = "no error";
  try {
    (void)load_exported_program(edited);
  } catch (const Pt2Error& e) { message = e.what(); }
  EXPECT_THAT(message, AllOf(HasSubstr("node 'check'"), HasSubstr("runtime assertion fails"), HasSubstr("twice is 6")));
}

// One graph cannot hold it: flat_function (what the CLI and packages compile) refuses, naming
// the sizes and the node that returns the first.
TEST_P(DataDependentTest, AOneGraphCompileIsRefusedNamingTheSizes) {
  const ExportedProgram program = load();
  std::string message;
  try {
    (void)program.flat_function();
  } catch (const Pt2Error& e) { message = e.what(); }
  EXPECT_THAT(message, AllOf(HasSubstr(file()), HasSubstr("data-dependent sizes (u0, u1, u2, u3; the first from node"),
                             HasSubstr("torch.ops.aten."), HasSubstr("cannot be compiled as one graph"),
                             HasSubstr("runs as exported")));
}

// compile_exported_program compiles the router (the calls before the first torch.where, all of
// known sizes) as a function of its own and runs the experts as exported: the training step
// equals eager PyTorch's, through a real compile (a forward and a backward graph).
TEST_P(DataDependentTest, CompiledInRegionsMatchesPyTorch) {
  const ExportedProgram program = load();
  const CompiledExportedProgram compiled = compile_exported_program(program);
  const testing::EagerStep expected = testing::load_eager_step("moe_routing", data_dependent_dir());
  testing::check_eager_step(
      program.parameters(), program.buffers(), [&](const TensorList& in) { return compiled(in); }, expected,
      file() + " compiled in regions");
  EXPECT_EQ(compiled.num_compiled_regions(expected.inputs), 1u);
  EXPECT_EQ(compiled.num_compiled(), 1u);
  EXPECT_THROW((void)compiled.compiled_state(expected.inputs), Pt2Error);
  {
    torch::NoGradGuard no_grad;  // an inference call compiles the region again, without a backward
    testing::expect_close(compiled(expected.inputs).at(0), expected.outputs.at(0), file() + " inference");
  }
  EXPECT_EQ(compiled.num_compiled(), 2u);
}

INSTANTIATE_TEST_SUITE_P(MoeRouting, DataDependentTest, ::testing::Values(std::string(), std::string(".aten")),
                         variant_name);

}  // namespace
}  // namespace aotpipe
