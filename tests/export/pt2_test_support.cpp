#include "pt2_test_support.h"

#include <caffe2/serialize/inline_container.h>
#include <torch/csrc/jit/serialization/pickle.h>

#include <fstream>
#include <iterator>
#include <stdexcept>

namespace aotpipe::testing {

std::filesystem::path pt2_dir() { return AOTPIPE_PT2_DIR; }

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

EagerStep load_eager_step(const std::string& model) {
  const auto dict = load_saved_dict(pt2_dir() / (model + ".expected.pt"));
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

}  // namespace aotpipe::testing
