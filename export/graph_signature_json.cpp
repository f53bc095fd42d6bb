// to_json: an ExportGraphSignature with torch.export's field and kind names, for comparison with
// Python (tests/export/graph_signature_oracle.py prints the same form).
#include <aotpipe/export/graph_signature.h>

#include <nlohmann/json.hpp>

namespace aotpipe::signature {
namespace {

using json = nlohmann::ordered_json;

json optional_string(const std::optional<std::string>& s) { return s ? json(*s) : json(nullptr); }

json name_map(const NameMap& map) {
  json j = json::object();
  for (const auto& [name, target] : map) j[name] = target;
  return j;
}

}  // namespace

std::string to_json(const ExportGraphSignature& signature) {
  json j;
  auto& inputs = j["input_specs"] = json::array();
  for (const InputSpec& s : signature.input_specs)
    inputs.push_back({{"kind", std::string(to_string(s.kind))},
                      {"arg", {{"name", s.arg.name}}},
                      {"target", optional_string(s.target)},
                      {"persistent", s.persistent ? json(*s.persistent) : json(nullptr)}});
  auto& outputs = j["output_specs"] = json::array();
  for (const OutputSpec& s : signature.output_specs)
    outputs.push_back({{"kind", std::string(to_string(s.kind))},
                       {"arg", {{"name", s.arg.name}}},
                       {"target", optional_string(s.target)}});
  if (auto backward = signature.backward_signature())
    j["backward_signature"] = {{"gradients_to_parameters", name_map(backward->gradients_to_parameters)},
                               {"gradients_to_user_inputs", name_map(backward->gradients_to_user_inputs)},
                               {"loss_output", backward->loss_output}};
  else
    j["backward_signature"] = nullptr;
  return j.dump();
}

}  // namespace aotpipe::signature
