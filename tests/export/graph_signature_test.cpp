// The graph signature of compiled modules against PyTorch's: graph_signature_oracle.py runs
// aot_export_module on the equivalent Python modules and prints the input/output specs. Kinds,
// targets and positions must match; value names differ between the two tracers, so ours are
// checked to be values of our graphs instead (and name targets compare by input position).
#include <aotpipe/driver/aot_module.h>
#include <aotpipe/export/graph_signature.h>

#include "../runtime/test_modules.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include <cstdio>
#include <cstdlib>
#include <optional>
#include <set>
#include <span>
#include <sys/wait.h>

namespace aotpipe {
namespace {

using json = nlohmann::json;
using testing::ConvBn;
using testing::ConvBnImpl;
using testing::LinearWithSteps;
using testing::LinearWithStepsImpl;
using testing::Mlp;
using testing::MlpImpl;

// ---- the oracle ------------------------------------------------------------------------------

struct Oracle {
  json cases;         // {case: {"input_specs": [...], "output_specs": [...]}}
  std::string error;  // why there are none
};

std::string shell_quote(const std::string& s) {
  std::string out = "'";
  for (char ch : s) out += ch == '\'' ? std::string("'\\''") : std::string(1, ch);
  return out + "'";
}

// Runs the oracle once per test program ($AOTPIPE_PYTHON, else the Python CMake found).
const Oracle& oracle() {
  static const Oracle o = [] {
    Oracle result;
    const char* env = std::getenv("AOTPIPE_PYTHON");
    const std::string python = env != nullptr && *env != '\0' ? env : AOTPIPE_GRAPH_SIGNATURE_DEFAULT_PYTHON;
    const std::string cmd = shell_quote(python) + " " + shell_quote(AOTPIPE_GRAPH_SIGNATURE_ORACLE_PY) + " 2>&1";
    std::string out;
    FILE* pipe = popen(cmd.c_str(), "r");
    if (pipe == nullptr) {
      result.error = "cannot run " + cmd;
      return result;
    }
    char buf[4096];
    for (std::size_t n; (n = fread(buf, 1, sizeof buf, pipe)) > 0;) out.append(buf, n);
    const int status = pclose(pipe);
    if (status != 0) {
      result.error = "the PyTorch oracle failed (" + cmd + ", status " + std::to_string(WEXITSTATUS(status)) +
                     "; set AOTPIPE_PYTHON to a Python with torch 2.11):\n" + out;
      return result;
    }
    try {
      result.cases = json::parse(out);
    } catch (const std::exception& e) {
      result.error = std::string("the oracle printed no JSON: ") + e.what() + "\n" + out.substr(0, 2000);
    }
    return result;
  }();
  return o;
}

// ---- the cases: the modules of graph_signature_oracle.py, in C++ ---------------------------

struct SignatureCase {
  std::string name;
  std::function<std::shared_ptr<torch::nn::Module>()> make;  // in the mode Python uses
  ModuleForward forward;
  std::function<TensorList()> make_inputs;
  std::optional<std::size_t> loss_index;  // none: an inference compile (Python's trace_joint=False)
};

at::Tensor squared_error(const at::Tensor& a, const at::Tensor& b) { return (a - b).pow(2).mean(); }

std::vector<SignatureCase> signature_cases() {
  std::vector<SignatureCase> c;
  c.push_back({"mlp", [] { return Mlp(6, 8, 4).ptr(); },
               [](torch::nn::Module& m, const TensorList& a) {
                 return TensorList{squared_error(dynamic_cast<MlpImpl&>(m).forward(a[0]), a[1])};
               },
               [] {
                 return TensorList{torch::randn({5, 6}).requires_grad_(), torch::randn({5, 4})};
               },
               0});
  c.push_back({"conv_bn_train", [] { return ConvBn().ptr(); },
               [](torch::nn::Module& m, const TensorList& a) {
                 return TensorList{squared_error(dynamic_cast<ConvBnImpl&>(m).forward(a[0]).relu(), a[1])};
               },
               [] {
                 return TensorList{torch::randn({2, 2, 5, 5}), torch::randn({2, 3, 3, 3})};
               },
               0});
  c.push_back(
      {"conv_bn_eval",
       [] {
         auto m = ConvBn();
         m->eval();
         return m.ptr();
       },
       [](torch::nn::Module& m, const TensorList& a) { return TensorList{dynamic_cast<ConvBnImpl&>(m).forward(a[0])}; },
       [] {
         return TensorList{torch::randn({2, 2, 5, 5})};
       },
       std::nullopt});
  c.push_back({"mutate_user_input", [] { return LinearWithSteps().ptr(); },
               [](torch::nn::Module& mod, const TensorList& a) {
                 auto& m = dynamic_cast<LinearWithStepsImpl&>(mod);
                 a[0].add_(1);
                 return TensorList{m.fc(a[0]) * m.scale};
               },
               [] {
                 return TensorList{torch::randn({2, 4})};
               },
               std::nullopt});
  c.push_back({"buffer_and_input_mutation", [] { return LinearWithSteps().ptr(); },
               [](torch::nn::Module& mod, const TensorList& a) {
                 auto& m = dynamic_cast<LinearWithStepsImpl&>(mod);
                 m.steps.add_(1);
                 a[1].mul_(2);
                 at::Tensor loss = (m.fc(a[0]) * m.scale * a[1]).sum();
                 return TensorList{a[1] * 3, loss};
               },
               [] {
                 return TensorList{torch::randn({2, 4}), torch::randn({3})};
               },
               1});
  return c;
}

// ---- comparing -------------------------------------------------------------------------------

bool names_an_input(const std::string& kind) {
  return kind == "USER_INPUT_MUTATION" || kind == "GRADIENT_TO_USER_INPUT";
}

std::optional<std::size_t> input_position(const json& specs, const json& name) {
  for (std::size_t i = 0; i < specs["input_specs"].size(); ++i)
    if (specs["input_specs"][i]["arg"]["name"] == name) return i;
  return std::nullopt;
}

// Kinds, targets and persistence position by position; a target that names a user input
// compares by that input's position.
void expect_same_specs(const json& ours, const json& python, const std::string& label) {
  for (const char* side : {"input_specs", "output_specs"}) {
    ASSERT_EQ(ours[side].size(), python[side].size())
        << label << " " << side << "\nours:   " << ours[side].dump() << "\npython: " << python[side].dump();
    for (std::size_t i = 0; i < ours[side].size(); ++i) {
      const json& o = ours[side][i];
      const json& p = python[side][i];
      const std::string where = label + " " + side + "[" + std::to_string(i) + "]";
      EXPECT_EQ(o["kind"], p["kind"]) << where;
      if (names_an_input(p["kind"].get<std::string>())) {
        EXPECT_EQ(input_position(ours, o["target"]), input_position(python, p["target"])) << where;
        EXPECT_TRUE(input_position(ours, o["target"]).has_value()) << where << ": target is not an input";
      } else {
        EXPECT_EQ(o["target"], p["target"]) << where;
      }
      if (p.contains("persistent")) EXPECT_EQ(o["persistent"], p["persistent"]) << where;
    }
  }
}

std::vector<std::string> names_of(std::span<Value* const> values) {
  std::vector<std::string> names;
  for (const Value* v : values) names.push_back(v->name());
  return names;
}

// Every name in the signature is the value of our graphs at the position it claims.
void expect_names_are_graph_values(const ExportGraphSignature& sig, const CompileState& state,
                                   const std::string& label) {
  const Graph& forward = state.function.needs_autograd ? state.partition->forward : *state.traced.inference_graph;
  const std::vector<std::string> inputs = names_of(forward.inputs());
  const std::vector<std::string> returns = names_of(forward.outputs());
  const std::vector<std::string> gradients =
      state.function.needs_autograd ? names_of(state.partition->backward.outputs()) : std::vector<std::string>{};
  ASSERT_EQ(sig.input_specs.size(), inputs.size()) << label;
  for (std::size_t i = 0; i < inputs.size(); ++i) EXPECT_EQ(sig.input_specs[i].arg.name, inputs[i]) << label;
  std::size_t forward_k = 0, gradient_k = 0;
  for (const auto& spec : sig.output_specs) {
    const bool is_gradient = spec.kind == signature::OutputKind::GradientToParameter ||
                             spec.kind == signature::OutputKind::GradientToUserInput;
    const std::vector<std::string>& graph_names = is_gradient ? gradients : returns;
    std::size_t& k = is_gradient ? gradient_k : forward_k;
    ASSERT_LT(k, graph_names.size()) << label << ": more " << (is_gradient ? "gradients" : "forward returns")
                                     << " than the graph has";
    EXPECT_EQ(spec.arg.name, graph_names[k++]) << label << " " << to_string(spec.kind);
  }
  EXPECT_EQ(gradient_k, gradients.size()) << label << ": every backward output is a gradient of the signature";
}

class GraphSignatureVsPython : public ::testing::TestWithParam<SignatureCase> {};

TEST_P(GraphSignatureVsPython, KindsTargetsAndPositionsMatch) {
  const SignatureCase& c = GetParam();
  ASSERT_EQ(oracle().error, "");
  ASSERT_TRUE(oracle().cases.contains(c.name)) << "no case '" << c.name << "' in graph_signature_oracle.py";
  const json& python = oracle().cases[c.name];

  auto module = c.make();
  CompiledModule compiled = aot_module(module, c.forward);
  const TensorList inputs = c.make_inputs();
  std::optional<torch::NoGradGuard> no_grad;
  if (!c.loss_index) no_grad.emplace();  // Python's trace_joint=False traces under no_grad
  const ExportGraphSignature sig = graph_signature(compiled, inputs, c.loss_index);
  const json ours = json::parse(to_json(sig));
  expect_same_specs(ours, python, c.name);

  auto state = compiled.compiled_state(inputs);
  EXPECT_EQ(state->function.needs_autograd, c.loss_index.has_value()) << c.name;
  expect_names_are_graph_values(sig, *state, c.name);

  // The views of the signature agree with the module and the specs.
  const LiftedModuleState lifted = lifted_state(*module);
  EXPECT_EQ(sig.parameters(), lifted.parameter_names);
  EXPECT_EQ(sig.buffers(), lifted.buffer_names);
  EXPECT_EQ(sig.user_inputs().size(), inputs.size());
  const auto backward = sig.backward_signature();
  ASSERT_EQ(backward.has_value(), c.loss_index.has_value()) << c.name;
  if (backward) {
    const std::size_t loss_position =
        sig.buffers_to_mutate().size() + sig.user_inputs_to_mutate().size() + *c.loss_index;
    EXPECT_EQ(backward->loss_output, sig.output_specs[loss_position].arg.name);
    std::size_t params_requiring_grad = 0;
    for (const at::Tensor& t : lifted.tensors) params_requiring_grad += t.requires_grad() ? 1 : 0;
    EXPECT_EQ(backward->gradients_to_parameters.size(), params_requiring_grad);
    EXPECT_EQ(ours["backward_signature"]["loss_output"], backward->loss_output);
  } else {
    EXPECT_TRUE(ours["backward_signature"].is_null());
  }
}

INSTANTIATE_TEST_SUITE_P(Modules, GraphSignatureVsPython, ::testing::ValuesIn(signature_cases()),
                         [](const auto& info) { return info.param.name; });

TEST(GraphSignatureOracle, CoversEveryCase) {
  ASSERT_EQ(oracle().error, "");
  std::set<std::string> python, ours;
  for (const auto& [name, specs] : oracle().cases.items()) python.insert(name);
  for (const auto& c : signature_cases()) ours.insert(c.name);
  EXPECT_EQ(ours, python);
}

// ---- refusals --------------------------------------------------------------------------------

TEST(GraphSignature, RefusesALossThatDoesNotFit) {
  const SignatureCase mlp = signature_cases()[0];
  CompiledModule compiled = aot_module(mlp.make(), mlp.forward);
  const TensorList inputs = mlp.make_inputs();
  EXPECT_THAT([&] { graph_signature(compiled, inputs, 1); },
              ::testing::ThrowsMessage<std::invalid_argument>(::testing::HasSubstr("out of range")));
  {
    torch::NoGradGuard no_grad;
    EXPECT_THAT([&] { graph_signature(compiled, inputs, 0); },
                ::testing::ThrowsMessage<std::invalid_argument>(::testing::HasSubstr("training compile")));
  }
  CompiledModule not_scalar = aot_module(Mlp(6, 8, 4).ptr(), [](torch::nn::Module& m, const TensorList& a) {
    return TensorList{dynamic_cast<MlpImpl&>(m).forward(a[0])};
  });
  EXPECT_THAT(
      [&] {
        graph_signature(not_scalar, {torch::randn({5, 6})}, 0);
      },
      ::testing::ThrowsMessage<std::invalid_argument>(::testing::HasSubstr("not a loss")));
  // Without a loss, a training compile still lists its gradients but has no backward signature.
  const ExportGraphSignature no_loss = graph_signature(not_scalar, {torch::randn({5, 6})});
  EXPECT_FALSE(no_loss.backward_signature().has_value());
  EXPECT_EQ(no_loss.output_specs.size(), 1u + 4u);
}

TEST(GraphSignature, RefusesACompileWhoseInputsWereDeduplicated) {
  // The same tensor as both user inputs, mutated: dedupe specializes the graph to one input.
  CompiledModule compiled = aot_module(LinearWithSteps().ptr(), [](torch::nn::Module& mod, const TensorList& a) {
    auto& m = dynamic_cast<LinearWithStepsImpl&>(mod);
    a[1].mul_(2);
    return TensorList{m.fc(a[0]) * m.scale};
  });
  torch::NoGradGuard no_grad;
  const at::Tensor x = torch::randn({2, 4});
  EXPECT_THAT(
      [&] {
        graph_signature(compiled, {x, x});
      },
      ::testing::ThrowsMessage<std::invalid_argument>(::testing::HasSubstr("one graph input per input")));
}

}  // namespace
}  // namespace aotpipe
