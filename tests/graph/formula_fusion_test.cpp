// graph/formula_fusion.h: which activation formulas become ATen's kernels, in the ways models
// write them (as torch.export records them: scalars as 0-dimensional constants or as literal
// Scalars), that the fused graph computes what the formula computes, and what is left alone.
#include <aotpipe/graph/autocast_region.h>
#include <aotpipe/graph/formula_fusion.h>
#include <aotpipe/graph/interpreter.h>
#include <aotpipe/graph/parser.h>
#include <aotpipe/graph/verifier.h>

#include <ATen/ATen.h>
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <numbers>
#include <string>
#include <vector>

namespace aotpipe {
namespace {

const double kBeta = std::sqrt(2.0 / std::numbers::pi);

// `body` between a graph header taking %x (and %other) and its return; {t} is the tensor type.
// Constants named in `scalars` are bound to 0-dimensional double tensors, as torch.export's
// Python numbers import.
Graph formula_graph(const std::string& body, const std::map<std::string, double>& scalars,
                    const std::string& returns = "%y", const std::string& type = "f32[4, 8]") {
  Graph g = parse_graph(fmt::format("graph f(%x: {0}, %other: {0}):\n{1}  return ({2})\n", type,
                                    fmt::format(fmt::runtime(body), fmt::arg("t", type)), returns));
  for (const auto& [key, value] : scalars) g.bind_constant(key, at::scalar_tensor(value, at::kDouble));
  return g;
}

std::vector<std::string> call_names(const Graph& g) {
  std::vector<std::string> names;
  for (const Node* n : g.nodes())
    if (n->is_call()) names.push_back(n->qualified_name());
  return names;
}

// Runs both graphs on the same inputs (x spanning GELU's curved range and its tails).
void expect_same_results(const Graph& original, const Graph& fused, double tolerance) {
  at::manual_seed(3);
  const auto dtype = original.input(0)->meta()->dtype;
  std::vector<at::Tensor> inputs{at::randn({4, 8}, at::TensorOptions().dtype(dtype)) * 4,
                                 at::randn({4, 8}, at::TensorOptions().dtype(dtype))};
  const auto expected = Interpreter(original).run(inputs);
  const auto actual = Interpreter(fused).run(inputs);
  ASSERT_EQ(actual.size(), expected.size());
  for (std::size_t i = 0; i < actual.size(); ++i)
    EXPECT_TRUE(at::allclose(actual[i], expected[i], tolerance, tolerance))
        << "output " << i << ": max difference " << (actual[i] - expected[i]).abs().max().item<double>();
}

struct FormulaCase {
  std::string name;
  std::string body;
  std::map<std::string, double> scalars;
  std::string kernel;           // FusedFormula::kernel
  std::size_t calls;            // calls it replaces
  bool exact_constants = true;  // false: its constants are the formula's in float32 only
};

std::string case_name(const ::testing::TestParamInfo<FormulaCase>& info) { return info.param.name; }

std::vector<FormulaCase> formula_cases() {
  return {
      // transformers' NewGELUActivation (GPT-2, ALBERT, FNet):
      // 0.5 * x * (1.0 + tanh(sqrt(2 / pi) * (x + 0.044715 * pow(x, 3.0))))
      {"gpt2_gelu_new",
       R"(  %half: f64[] = constant("half")
  %m0: {t} = aten::mul.Tensor(%x, %half)
  %cube: {t} = aten::pow.Tensor_Scalar(%x, 3.0)
  %kappa: f64[] = constant("kappa")
  %m1: {t} = aten::mul.Tensor(%cube, %kappa)
  %a0: {t} = aten::add.Tensor(%x, %m1)
  %beta: f64[] = constant("beta")
  %m2: {t} = aten::mul.Tensor(%a0, %beta)
  %th: {t} = aten::tanh(%m2)
  %one: f64[] = constant("one")
  %a1: {t} = aten::add.Tensor(%th, %one)
  %y: {t} = aten::mul.Tensor(%m0, %a1)
)",
       {{"half", 0.5}, {"kappa", 0.044715}, {"beta", kBeta}, {"one", 1.0}},
       "aten::gelu(approximate='tanh')",
       8},
      // BLOOM's bloom_gelu_forward, with its rounded constant and literal Scalars:
      // x * 0.5 * (1.0 + tanh(0.79788456 * x * (1 + 0.044715 * x * x)))
      {"bloom_gelu",
       R"(  %m0: {t} = aten::mul.Scalar(%x, 0.5)
  %m1: {t} = aten::mul.Scalar(%x, 0.79788456)
  %m2: {t} = aten::mul.Scalar(%x, 0.044715)
  %m3: {t} = aten::mul.Tensor(%m2, %x)
  %a0: {t} = aten::add.Scalar(%m3, 1)
  %m4: {t} = aten::mul.Tensor(%m1, %a0)
  %th: {t} = aten::tanh(%m4)
  %a1: {t} = aten::add.Scalar(%th, 1.0)
  %y: {t} = aten::mul.Tensor(%m0, %a1)
)",
       {},
       "aten::gelu(approximate='tanh')",
       9,
       false},
      // The erf GELU as older BERTs write it, divided by sqrt(2), the 1 added as 1 - (-erf):
      // x * 0.5 * (1.0 - (-erf(x / sqrt(2))))
      {"erf_gelu",
       R"(  %sqrt2: f64[] = constant("sqrt2")
  %d: {t} = aten::div.Tensor(%x, %sqrt2)
  %e: {t} = aten::erf(%d)
  %ne: {t} = aten::neg(%e)
  %r: {t} = aten::rsub.Scalar(%ne, 1.0)
  %m0: {t} = aten::mul.Scalar(%x, 0.5)
  %y: {t} = aten::mul.Tensor(%m0, %r)
)",
       {{"sqrt2", std::sqrt(2.0)}},
       "aten::gelu",
       6},
      // The same function multiplied out: (x + x * tanh(beta * x + beta * kappa * x * x * x)) / 2.
      {"gelu_multiplied_out",
       R"(  %x2: {t} = aten::mul.Tensor(%x, %x)
  %x3: {t} = aten::mul.Tensor(%x2, %x)
  %k: {t} = aten::mul.Scalar(%x3, 0.035677408136300125)
  %b: {t} = aten::mul.Scalar(%x, 0.7978845608028654)
  %arg: {t} = aten::add.Tensor(%b, %k)
  %th: {t} = aten::tanh(%arg)
  %xt: {t} = aten::mul.Tensor(%x, %th)
  %s: {t} = aten::add.Tensor(%x, %xt)
  %y: {t} = aten::div.Scalar(%s, 2)
)",
       {},
       "aten::gelu(approximate='tanh')",
       9},
      {"silu",
       R"(  %s: {t} = aten::sigmoid(%x)
  %y: {t} = aten::mul.Tensor(%s, %x)
)",
       {},
       "aten::silu",
       2},
  };
}

class FusedFormulaTest : public ::testing::TestWithParam<FormulaCase> {};

TEST_P(FusedFormulaTest, BecomesOneKernelComputingTheSame) {
  const FormulaCase& c = GetParam();
  for (const char* type : {"f32[4, 8]", "f64[4, 8]"}) {
    const Graph original = formula_graph(c.body, c.scalars, "%y", type);
    Graph fused = original;
    const auto result = fuse_pointwise_formulas(fused);
    if (!c.exact_constants && std::string(type).starts_with("f64")) {
      EXPECT_TRUE(result.empty()) << "float64 tells its constants from the formula's";
      continue;
    }
    ASSERT_EQ(result.size(), 1u) << type << "\n" << fused.to_string();
    EXPECT_EQ(result[0].kernel, c.kernel);
    EXPECT_EQ(result[0].value, "y");
    EXPECT_EQ(result[0].calls, c.calls);
    verify(fused);
    // One call, the value keeps its name and metadata, no constant left.
    ASSERT_EQ(fused.num_nodes(), 1u) << fused.to_string();
    const Node& kernel = *fused.nodes()[0];
    EXPECT_EQ(kernel.qualified_name(), c.kernel.substr(0, c.kernel.find('(')));
    EXPECT_EQ(kernel.output()->name(), "y");
    EXPECT_EQ(*kernel.output()->meta(), *original.outputs()[0]->meta());
    expect_same_results(original, fused, std::string(type).starts_with("f32") ? 2e-6 : 1e-12);
  }
}

INSTANTIATE_TEST_SUITE_P(Formulas, FusedFormulaTest, ::testing::ValuesIn(formula_cases()), case_name);

const FormulaCase& gpt2_case() {
  static const FormulaCase c = formula_cases()[0];
  return c;
}

TEST(FormulaFusion, ConstantsMustBeTheFormulasToFloat32sPrecision) {
  auto scalars = gpt2_case().scalars;
  scalars["kappa"] = 0.0447;  // a different curve
  Graph g = formula_graph(gpt2_case().body, scalars);
  const std::string before = g.to_string();
  EXPECT_TRUE(fuse_pointwise_formulas(g).empty());
  EXPECT_EQ(g.to_string(), before);

  scalars = gpt2_case().scalars;
  scalars["beta"] = 0.7978845;  // sqrt(2/pi) to seven digits: float32 sees the same number
  g = formula_graph(gpt2_case().body, scalars);
  EXPECT_EQ(fuse_pointwise_formulas(g).size(), 1u);
}

TEST(FormulaFusion, AnIntermediateReadElsewhereKeepsTheFormula) {
  Graph g = formula_graph(gpt2_case().body, gpt2_case().scalars, "%y, %th");
  EXPECT_TRUE(fuse_pointwise_formulas(g).empty());
  EXPECT_EQ(g.num_nodes(), 12u);
}

TEST(FormulaFusion, ASecondTensorInTheFormulaIsNotX) {
  // x * sigmoid(other) is a gate, not SiLU.
  Graph g = formula_graph(R"(  %s: {t} = aten::sigmoid(%other)
  %y: {t} = aten::mul.Tensor(%s, %x)
)",
                          {});
  EXPECT_TRUE(fuse_pointwise_formulas(g).empty());
}

TEST(FormulaFusion, AutocastRegionsAreLeftAlone) {
  Graph g = formula_graph(gpt2_case().body, gpt2_case().scalars);
  for (Node* n : g.nodes())
    if (n->is_call() && n->qualified_name() == "aten::pow.Tensor_Scalar") n->attrs()[kAutocastAttr] = "cpu,BFloat16";
  EXPECT_TRUE(fuse_pointwise_formulas(g).empty());
}

TEST(FormulaFusion, AWriteInsideTheFormulaKeepsIt) {
  // The training IR keeps in-place ops: x written after the formula's first read of it.
  std::string body = gpt2_case().body;
  const std::string cube = "  %cube: {t} = aten::pow.Tensor_Scalar(%x, 3.0)\n";
  ASSERT_NE(body.find(cube), std::string::npos);
  body.insert(body.find(cube), "  %x2: {t} = aten::mul_.Tensor(%x, %other)\n");
  Graph g = formula_graph(body, gpt2_case().scalars);
  EXPECT_TRUE(fuse_pointwise_formulas(g).empty());
  // The same write before the formula's first call leaves it whole.
  body = gpt2_case().body;
  body.insert(0, "  %x2: {t} = aten::mul_.Tensor(%x, %other)\n");
  g = formula_graph(body, gpt2_case().scalars);
  EXPECT_EQ(fuse_pointwise_formulas(g).size(), 1u);
}

TEST(FormulaFusion, NestedFormulasBothFuseAndSharedConstantsStay) {
  // silu(gelu_new(x)), and the gelu's 0.5 also scales `other`.
  Graph g = formula_graph(gpt2_case().body + R"(  %s: {t} = aten::sigmoid(%y)
  %z: {t} = aten::mul.Tensor(%y, %s)
  %w: {t} = aten::mul.Tensor(%other, %half)
)",
                          gpt2_case().scalars, "%z, %w");
  const Graph original = g;
  const auto result = fuse_pointwise_formulas(g);
  ASSERT_EQ(result.size(), 2u);
  EXPECT_EQ(result[0].kernel, "aten::gelu(approximate='tanh')");
  EXPECT_EQ(result[1].kernel, "aten::silu");
  verify(g);
  EXPECT_EQ(call_names(g), (std::vector<std::string>{"aten::gelu", "aten::silu", "aten::mul.Tensor"}));
  EXPECT_NE(g.find_value("half"), nullptr);
  EXPECT_EQ(g.find_value("kappa"), nullptr);
  expect_same_results(original, g, 2e-6);
}

TEST(FormulaFusion, AGraphWithoutTanhErfOrSigmoidIsUntouched) {
  Graph g = formula_graph(R"(  %m: {t} = aten::mul.Scalar(%x, 0.5)
  %y: {t} = aten::mul.Tensor(%m, %x)
)",
                          {});
  const std::string before = g.to_string();
  EXPECT_TRUE(fuse_pointwise_formulas(g).empty());
  EXPECT_EQ(g.to_string(), before);
}

}  // namespace
}  // namespace aotpipe
