// to_json: ViewAndMutationMeta with PyTorch's field names, for comparison with Python.
#include <aotpipe/stages/metadata/collect_metadata.h>

#include <nlohmann/json.hpp>

namespace aotpipe {

std::string to_json(const ViewAndMutationMeta& meta) {
  nlohmann::ordered_json j;
  auto& inputs = j["input_info"] = nlohmann::ordered_json::array();
  for (const auto& in : meta.input_info) {
    inputs.push_back({{"is_leaf", in.is_leaf},
                      {"mutates_data", in.mutates_data},
                      {"mutates_metadata", in.mutates_metadata},
                      {"mutations_hidden_from_autograd", in.mutations_hidden_from_autograd},
                      {"mutations_under_no_grad_or_inference_mode", in.mutations_under_no_grad_or_inference_mode},
                      {"mutates_storage_metadata", in.mutates_storage_metadata},
                      {"requires_grad", in.requires_grad},
                      {"keep_input_mutations", in.keep_input_mutations},
                      {"mutation_type", std::string(to_string(in.mutation_type()))}});
  }
  auto& outputs = j["output_info"] = nlohmann::ordered_json::array();
  for (const auto& out : meta.output_info) {
    nlohmann::ordered_json o;
    o["output_type"] = std::string(to_string(out.output_type));
    o["base_idx"] = out.base_idx ? nlohmann::ordered_json(*out.base_idx) : nlohmann::ordered_json(nullptr);
    o["requires_grad"] = out.requires_grad;
    outputs.push_back(std::move(o));
  }
  j["num_intermediate_bases"] = meta.num_intermediate_bases;
  j["keep_input_mutations"] = meta.keep_input_mutations;
  auto& tangents = j["traced_tangents"] = nlohmann::ordered_json::array();
  for (const auto& t : meta.traced_tangents)
    tangents.push_back({{"shape", t.sizes}, {"dtype", dtype_torch_name(t.dtype)}});
  return j.dump();
}

}  // namespace aotpipe
