#include <aotpipe/graph/op_properties.h>

#include <string_view>
#include <unordered_set>

namespace aotpipe {

namespace {
// Data-dependent ops that libtorch 2.11 leaves untagged.
bool is_listed_data_dependent(std::string_view name) {
  static const std::unordered_set<std::string_view> ops = {"aten::_local_scalar_dense",
                                                           "aten::item",
                                                           "aten::nonzero",
                                                           "aten::nonzero_numpy",
                                                           "aten::argwhere",
                                                           "aten::masked_select",
                                                           "aten::unique_consecutive",
                                                           "aten::_unique",
                                                           "aten::_unique2",
                                                           "aten::unique_dim",
                                                           "aten::unique_dim_consecutive",
                                                           "aten::equal",
                                                           "aten::is_nonzero",
                                                           "aten::allclose",
                                                           "aten::bincount",
                                                           "aten::histc",
                                                           "aten::_ragged_idx"};
  return ops.count(name) > 0;
}
}  // namespace

bool has_data_dependent_output(const c10::OperatorHandle& op) {
  return is_listed_data_dependent(op.operator_name().name) || op.hasTag(at::Tag::data_dependent_output) ||
         op.hasTag(at::Tag::dynamic_output_shape);
}

}  // namespace aotpipe
