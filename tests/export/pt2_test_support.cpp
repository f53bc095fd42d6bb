#include "pt2_test_support.h"

#include <gtest/gtest.h>
#include <torch/autograd.h>
#include <torch/torch.h>
#include <caffe2/serialize/inline_container.h>
#include <torch/csrc/jit/serialization/pickle.h>

#include <fstream>
#include <iterator>
#include <optional>
#include <stdexcept>

namespace aotpipe::testing {

void expect_close(const at::Tensor& actual, const at::Tensor& expected, const std::string& what) {
  ASSERT_TRUE(actual.defined()) << what << " is undefined";
  ASSERT_EQ(actual.sizes(), expected.sizes()) << what;
  ASSERT_EQ(actual.scalar_type(), expected.scalar_type()) << what;
  EXPECT_TRUE(at::allclose(actual.detach().cpu(), expected, 1e-4, 1e-5))
      << what << ": max abs difference "
      << (actual.detach().cpu().to(at::kDouble) - expected.to(at::kDouble)).abs().max().item<double>();
}

void check_eager_step(const std::vector<NamedTensor>& parameters, const std::vector<NamedTensor>& buffers,
                      const std::function<std::vector<at::Tensor>(const std::vector<at::Tensor>&)>& call,
                      const EagerStep& expected, const std::string& label) {
  std::vector<at::Tensor> outputs;
  {
    std::optional<torch::NoGradGuard> no_grad;
    if (!expected.training) no_grad.emplace();
    outputs = call(expected.inputs);
  }
  ASSERT_EQ(outputs.size(), expected.outputs.size()) << label;
  for (std::size_t i = 0; i < outputs.size(); ++i)
    expect_close(outputs[i], expected.outputs[i], label + ": output " + std::to_string(i));
  if (expected.training) {
    torch::autograd::backward(outputs, expected.grad_outputs);
    for (const NamedTensor& p : parameters) {
      auto it = expected.grads.find(p.name);
      if (it == expected.grads.end()) {
        EXPECT_FALSE(p.tensor.grad().defined()) << label << ": " << p.name << " has a gradient eager has not";
        continue;
      }
      expect_close(p.tensor.grad(), it->second, label + ": grad of " + p.name);
    }
    EXPECT_EQ(expected.grads.size(), [&] {
      std::size_t n = 0;
      for (const NamedTensor& p : parameters) n += p.tensor.grad().defined();
      return n;
    }()) << label;
  }
  for (const NamedTensor& b : buffers) {
    auto it = expected.buffers.find(b.name);
    ASSERT_NE(it, expected.buffers.end()) << label << ": eager has no buffer " << b.name;
    expect_close(b.tensor, it->second, label + ": buffer " + b.name + " after the step");
  }
}

std::filesystem::path pt2_dir() { return AOTPIPE_PT2_DIR; }
std::filesystem::path data_dependent_dir() {
  return std::filesystem::path(AOTPIPE_PT2_DIR).parent_path().parent_path() / "tests" / "export" / "data_dependent";
}

std::vector<at::Tensor> tensor_list(const c10::IValue& v) {
  std::vector<at::Tensor> out;
  for (const c10::IValue& e : v.toListRef()) out.push_back(e.toTensor());
  return out;
}

std::map<std::string, at::Tensor> tensor_dict(const c10::IValue& v) {
  std::map<std::string, at::Tensor> out;
  for (const auto& entry : v.toGenericDict()) out.emplace(entry.key().toStringRef(), entry.value().toTensor());
  return out;
}

c10::Dict<c10::IValue, c10::IValue> load_saved_dict(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot open " + path.string());
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return torch::jit::pickle_load(bytes).toGenericDict();
}

EagerStep load_eager_step(const std::string& model, const std::filesystem::path& dir) {
  const auto dict = load_saved_dict(dir / (model + ".expected.pt"));
  EagerStep step;
  step.inputs = tensor_list(dict.at("inputs"));
  step.outputs = tensor_list(dict.at("outputs"));
  step.grad_outputs = tensor_list(dict.at("grad_outputs"));
  step.grads = tensor_dict(dict.at("grads"));
  step.buffers = tensor_dict(dict.at("buffers"));
  step.training = dict.at("training").toInt() != 0;
  return step;
}

void rewrite_archive(const std::filesystem::path& from, const std::filesystem::path& to,
                     const std::function<void(nlohmann::json&)>& edit_model,
                     const std::function<void(const std::string&, std::string&)>& edit_record) {
  caffe2::serialize::PyTorchStreamReader reader(from.string());
  caffe2::serialize::PyTorchStreamWriter writer(to.string());
  for (const std::string& name : reader.getAllRecords()) {
    if (name.rfind(".data/", 0) == 0) continue;  // the writer writes its own version records
    auto [data, size] = reader.getRecord(name);
    std::string bytes(static_cast<const char*>(data.get()), size);
    if (name.rfind("models/", 0) == 0 && name.ends_with(".json")) {
      nlohmann::json model = nlohmann::json::parse(bytes);
      if (edit_model) edit_model(model);
      bytes = model.dump();
    } else if (edit_record) {
      edit_record(name, bytes);
    }
    writer.writeRecord(name, bytes.data(), bytes.size());
  }
  writer.writeEndOfFile();
}

bool claim_size(std::string& zip, const std::string& suffix, std::uint32_t bytes) {
  auto u16 = [&](std::size_t at) {
    return static_cast<std::size_t>(static_cast<unsigned char>(zip[at])) |
           static_cast<std::size_t>(static_cast<unsigned char>(zip[at + 1])) << 8;
  };
  for (std::size_t at = zip.find("PK\x01\x02"); at != std::string::npos; at = zip.find("PK\x01\x02", at + 4)) {
    const std::size_t name_length = u16(at + 28);
    if (at + 46 + name_length > zip.size() || name_length < suffix.size() ||
        zip.compare(at + 46 + name_length - suffix.size(), suffix.size(), suffix) != 0)
      continue;
    zip[at + 10] = 8;
    zip[at + 11] = 0;
    for (int i = 0; i < 4; ++i) zip[at + 24 + i] = static_cast<char>((bytes >> (8 * i)) & 0xff);
    return true;
  }
  return false;
}

}  // namespace aotpipe::testing
