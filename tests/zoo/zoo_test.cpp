// The model zoo: models no one here wrote (torchvision, timm, Hugging Face transformers), exported
// with torch.export by tests/zoo/export_zoo.py (scripts/zoo-export caches them outside the clone),
// then loaded, compiled and run from C++. Each model is one training step and one eval-mode
// inference call against eager PyTorch: outputs, every parameter's .grad (under each of its
// names: tied parameters included), buffers after the step. Values are judged as PyTorch's own
// accuracy checks judge them: allclose, or within float32's own error against a float64 run of
// the same step (within_fp64_error). A model torch.export could not export is a skipped case
// whose message is the export's error; a program PyTorch itself cannot differentiate (torch.export
// dropped a custom autograd.Function's backward) must be refused with PyTorch's error, and its
// eval-mode call still equals eager's. A program with data-dependent sizes (unbacked symbols: a
// mixture of experts) is compiled in regions around them (docs/export.md) and held to eager the
// same way, with at least one region compiled; a compile as one graph must be refused naming them.
#include <aotpipe/backend/backend_registry.h>
#include <aotpipe/export/compiled_exported_program.h>
#include <aotpipe/graph/interpreter.h>
#include <aotpipe/runtime/eager_equivalence.h>

#include "pt2_test_support.h"
#include "test_support.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <torch/csrc/autograd/autograd.h>
#include <c10/core/GradMode.h>

#include <cstdlib>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>

namespace aotpipe {
namespace {

using testing::load_saved_dict;
using testing::tensor_dict;
using testing::tensor_list;

std::filesystem::path zoo_dir() {
  if (const char* dir = std::getenv("AOTPIPE_ZOO_DIR")) return dir;
  std::ifstream file(AOTPIPE_ZOO_DIR_FILE);  // written by the zoo_export fixture (scripts/zoo-export)
  std::string dir;
  std::getline(file, dir);
  return dir;
}

// AOTPIPE_TEST_BACKEND=NAME compiles every model with that registered backend (backend/
// backend_registry.h: "planned" runs the memory plan), instead of the default.
AotConfig test_config() {
  AotConfig config;
  if (const char* name = std::getenv("AOTPIPE_TEST_BACKEND")) {
    std::optional<Compiler> backend = find_backend(name);
    if (!backend) throw std::invalid_argument(std::string("AOTPIPE_TEST_BACKEND=") + name + ": no such backend");
    config.fw_compiler = *backend;
  }
  return config;
}

// AOTPIPE_TEST_BACKEND=planned: the runs used their arenas, and no out= kernel refused a call.
[[maybe_unused]] ::testing::Environment* const planned_runs_check =
    ::testing::AddGlobalTestEnvironment(testing::planned_runs_check());

struct Reference {
  const at::Tensor& fp32;
  const at::Tensor* fp64;  // null where the float64 run failed
};

// Empty when `result` is as eager's: allclose(1e-4), or within float32's error of the float64 run.
std::string judge(const std::string& what, const at::Tensor& result, Reference ref) {
  if (!result.defined()) return what + ": undefined";
  if (result.sizes() != ref.fp32.sizes() || result.scalar_type() != ref.fp32.scalar_type())
    return what + ": " + to_string(TensorMeta::of(result)) + ", eager " + to_string(TensorMeta::of(ref.fp32));
  const at::Tensor r = result.detach().cpu();
  if (!r.is_floating_point()) return at::equal(r, ref.fp32) ? "" : what + ": values differ";
  if (at::allclose(r, ref.fp32, 1e-4, 1e-4, /*equal_nan=*/true)) return "";
  if (ref.fp64 && within_fp64_error(ref.fp32, r, *ref.fp64)) return "";
  return what + ": max abs difference " +
         std::to_string((r.to(at::kDouble) - ref.fp32.to(at::kDouble)).abs().max().item<double>()) +
         (ref.fp64 ? ", beyond 2x float32's own error against float64" : " (no float64 reference)");
}

class ZooModel : public ::testing::Test {
 public:
  explicit ZooModel(nlohmann::json entry) : entry_(std::move(entry)), name_(entry_.at("name")) {}

 protected:
  void TestBody() override {
    if (entry_.value("status", "") == "export_failed")
      GTEST_SKIP() << name_ << ": torch.export cannot export it: " << entry_.value("error", "?");
    if (entry_.contains("data_dependent")) expect_compile_refused_for_data_dependent_sizes();
    expected_ = load_saved_dict(zoo_dir() / (name_ + ".expected.pt"));
    training_step();
    inference_call();
  }

 private:
  std::optional<TensorList> list64(const char* key) const {
    if (!expected_.contains(key)) return std::nullopt;
    return tensor_list(expected_.at(key));
  }
  std::optional<std::map<std::string, at::Tensor>> dict64(const char* key) const {
    if (!expected_.contains(key)) return std::nullopt;
    return tensor_dict(expected_.at(key));
  }
  static const at::Tensor* at_index(const std::optional<TensorList>& list, std::size_t i) {
    return list && i < list->size() ? &(*list)[i] : nullptr;
  }
  static const at::Tensor* by_name(const std::optional<std::map<std::string, at::Tensor>>& dict,
                                   const std::string& name) {
    if (!dict) return nullptr;
    auto it = dict->find(name);
    return it == dict->end() ? nullptr : &it->second;
  }
  TensorList fresh_inputs() const {
    TensorList inputs;
    for (const at::Tensor& t : tensor_list(expected_.at("inputs"))) inputs.push_back(t.clone());
    return inputs;
  }

  void expect_outputs(const TensorList& outputs, const char* key, const char* key64) const {
    const TensorList eager = tensor_list(expected_.at(key));
    const auto eager64 = list64(key64);
    ASSERT_EQ(outputs.size(), eager.size()) << name_ << ": " << key;
    for (std::size_t i = 0; i < outputs.size(); ++i) {
      const std::string diff =
          judge(std::string(key) + " " + std::to_string(i), outputs[i], {eager[i], at_index(eager64, i)});
      EXPECT_EQ(diff, "") << name_;
    }
  }

  // A program with sizes read from tensor values (a mixture of experts' routing): it loads,
  // naming the sizes the export found, and a compile as one graph is refused naming them.
  void expect_compile_refused_for_data_dependent_sizes() {
    const std::set<std::string> exported = entry_.at("data_dependent");  // of the training and eval exports
    ExportedProgram program = load_exported_program(zoo_dir() / (name_ + ".train.pt2"));
    ASSERT_FALSE(program.data_dependent_dims().empty()) << name_;
    for (const SymbolicDim& dim : program.data_dependent_dims())
      EXPECT_TRUE(exported.count(dim.symbol)) << name_ << ": " << dim.symbol << " is not one the export found";
    std::string message = "no error";
    try {
      (void)program.flat_function();
    } catch (const std::exception& e) { message = e.what(); }
    EXPECT_NE(message.find("data-dependent sizes (" + program.data_dependent_dims().front().symbol), std::string::npos)
        << name_ << ": " << message;
  }

  // How the test calls the program: compiled (in regions, where it has data-dependent sizes: at
  // least one of them compiled).
  std::function<TensorList(const TensorList&)> step_of(const ExportedProgram& program) const {
    auto compiled = std::make_shared<CompiledExportedProgram>(compile_exported_program(program, test_config()));
    const bool regions = entry_.contains("data_dependent");
    return [compiled, regions, name = name_](const TensorList& in) {
      TensorList out = (*compiled)(in);
      if (regions) EXPECT_GE(compiled->num_compiled_regions(in), 1u) << name;
      return out;
    };
  }

  void training_step() {
    ExportedProgram program = load_exported_program(zoo_dir() / (name_ + ".train.pt2"));
    const auto compiled = step_of(program);
    if (entry_.contains("export_backward_error")) {
      // torch.export kept a custom autograd.Function's forward only, and PyTorch's own
      // ep.module() cannot differentiate the program: aotpipe refuses it with the same error.
      const std::string pytorch = entry_.at("export_backward_error");  // "RuntimeError: what: detail"
      const std::string what = pytorch.substr(pytorch.find(": ") == std::string::npos ? 0 : pytorch.find(": ") + 2);
      const std::string cause = what.substr(0, what.find(':'));
      try {
        compiled(fresh_inputs());
        ADD_FAILURE() << name_ << ": compiled a training step PyTorch cannot differentiate (" << pytorch << ")";
      } catch (const std::exception& e) {
        EXPECT_NE(std::string(e.what()).find(cause), std::string::npos)
            << name_ << ": " << e.what() << "\nPyTorch: " << pytorch;
      }
      return;
    }
    const TensorList outputs = compiled(fresh_inputs());
    expect_outputs(outputs, "train_outputs", "train_outputs64");

    const TensorList grad_outputs = tensor_list(expected_.at("grad_outputs"));
    ASSERT_EQ(grad_outputs.size(), outputs.size()) << name_;
    TensorList differentiable, seeds;
    for (std::size_t i = 0; i < outputs.size(); ++i)
      if (outputs[i].requires_grad() && grad_outputs[i].numel() == outputs[i].numel()) {
        differentiable.push_back(outputs[i]);
        seeds.push_back(grad_outputs[i]);
      }
    ASSERT_FALSE(differentiable.empty()) << name_ << ": no output requires grad in a training step";
    torch::autograd::backward(differentiable, seeds);

    // Tied parameters are one tensor under each name, so each name's .grad is the sum of all uses.
    for (const auto& pair : entry_.value("tied", nlohmann::json::array())) {
      const std::string a = pair.at(0), b = pair.at(1);
      const at::Tensor *ta = nullptr, *tb = nullptr;
      for (const NamedTensor& p : program.parameters()) {
        if (p.name == a) ta = &p.tensor;
        if (p.name == b) tb = &p.tensor;
      }
      ASSERT_TRUE(ta && tb) << name_ << ": tied parameters " << a << ", " << b << " not both in the program";
      EXPECT_TRUE(ta->is_same(*tb)) << name_ << ": tied parameters " << a << " and " << b << " are two tensors";
    }

    const auto grads = tensor_dict(expected_.at("grads"));
    const auto grads64 = dict64("grads64");
    std::set<std::string> without_grad;
    if (expected_.contains("no_grad"))
      for (const c10::IValue& n : expected_.at("no_grad").toListRef()) without_grad.insert(n.toStringRef());
    std::size_t checked = 0;
    for (const NamedTensor& p : program.parameters()) {
      if (without_grad.count(p.name)) {
        EXPECT_FALSE(p.tensor.grad().defined() && p.tensor.grad().abs().max().item<double>() > 0)
            << name_ << ": " << p.name << " has a gradient; eager has none";
        continue;
      }
      auto it = grads.find(p.name);
      if (it == grads.end()) {
        ADD_FAILURE() << name_ << ": eager recorded no gradient entry for parameter " << p.name;
        continue;
      }
      EXPECT_EQ(judge("grad of " + p.name, p.tensor.grad(), {it->second, by_name(grads64, p.name)}), "") << name_;
      ++checked;
    }
    EXPECT_EQ(checked, grads.size()) << name_ << ": parameters with a gradient in eager";

    const auto buffers = tensor_dict(expected_.at("buffers"));
    const auto buffers64 = dict64("buffers64");
    for (const NamedTensor& b : program.buffers()) {
      auto it = buffers.find(b.name);
      if (it == buffers.end()) continue;  // a buffer eager's module does not list (a lifted constant)
      EXPECT_EQ(judge("buffer " + b.name, b.tensor, {it->second, by_name(buffers64, b.name)}), "") << name_;
    }
  }

  void inference_call() {
    ExportedProgram program = load_exported_program(zoo_dir() / (name_ + ".eval.pt2"));
    const auto compiled = step_of(program);
    c10::NoGradGuard no_grad;
    expect_outputs(compiled(fresh_inputs()), "eval_outputs", "eval_outputs64");
  }

  nlohmann::json entry_;
  std::string name_;
  c10::impl::GenericDict expected_{c10::StringType::get(), c10::AnyType::get()};
};

}  // namespace
}  // namespace aotpipe

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  // A missing or malformed manifest: a message and a failing status, not an abort.
  try {
    const std::filesystem::path manifest_path = aotpipe::zoo_dir() / "manifest.json";
    std::ifstream manifest_file(manifest_path);
    if (!manifest_file) {
      std::fprintf(stderr, "zoo_test: no zoo at %s (scripts/zoo-export makes it)\n", manifest_path.c_str());
      return 1;
    }
    const nlohmann::json manifest = nlohmann::json::parse(manifest_file);
    for (const nlohmann::json& entry : manifest.at("models")) {
      const std::string name = entry.at("name");
      ::testing::RegisterTest("Zoo", name.c_str(), nullptr, nullptr, __FILE__, __LINE__,
                              [entry]() -> ::testing::Test* { return new aotpipe::ZooModel(entry); });
    }
    return RUN_ALL_TESTS();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "zoo_test: %s\n", e.what());
    return 1;
  }
}
