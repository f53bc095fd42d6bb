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

std::optional<c10::OperatorHandle> pointwise_inplace_variant(const c10::OperatorHandle& op) {
  if (!op.hasTag(at::Tag::pointwise)) return std::nullopt;
  const c10::FunctionSchema& schema = op.schema();
  if (schema.is_mutable() || schema.returns().size() != 1 || schema.returns()[0].alias_info() ||
      schema.returns()[0].type()->kind() != c10::TypeKind::TensorType || schema.arguments().empty() ||
      schema.arguments()[0].type()->kind() != c10::TypeKind::TensorType)
    return std::nullopt;
  const c10::OperatorName& name = op.operator_name();
  auto inplace = c10::Dispatcher::singleton().findSchema({name.name + "_", name.overload_name});
  if (!inplace) return std::nullopt;
  const auto& formals = schema.arguments();
  const auto& inplace_formals = inplace->schema().arguments();
  if (inplace_formals.size() != formals.size() || !inplace_formals[0].alias_info() ||
      !inplace_formals[0].alias_info()->isWrite())
    return std::nullopt;
  for (std::size_t k = 0; k < formals.size(); ++k)
    if (formals[k].name() != inplace_formals[k].name() || *formals[k].type() != *inplace_formals[k].type() ||
        (k > 0 && inplace_formals[k].alias_info()))
      return std::nullopt;
  return inplace;
}

}  // namespace aotpipe
