#include <aotpipe/graph/op_properties.h>

#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

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

// A functional op of one result that is a fresh tensor. (An out= kernel of several results returns
// a tuple of references into the arguments, which libtorch 2.11's boxed wrapper,
// make_boxed_from_unboxed_functor, reads after it has popped them: such a kernel cannot be called
// boxed, so out_variant takes only these too.)
bool returns_one_fresh_tensor(const c10::FunctionSchema& schema) {
  return !schema.is_mutable() && schema.returns().size() == 1 && !schema.returns()[0].alias_info() &&
         schema.returns()[0].type()->kind() == c10::TypeKind::TensorType;
}
}  // namespace

bool has_data_dependent_output(const c10::OperatorHandle& op) {
  return is_listed_data_dependent(op.operator_name().name) || op.hasTag(at::Tag::data_dependent_output) ||
         op.hasTag(at::Tag::dynamic_output_shape);
}

bool returns_hidden_view(const c10::OperatorHandle& op) {
  static const std::unordered_set<std::string_view> ops = {"aten::_unsafe_view", "aten::unsafe_split",
                                                           "aten::unsafe_split_with_sizes", "aten::unsafe_chunk"};
  return ops.count(op.operator_name().name) > 0;
}

bool result_needs_grad_mode(const c10::OperatorHandle& op, std::size_t result) {
  return result == 3 && op.operator_name().name == "aten::mkldnn_rnn_layer";
}

std::optional<c10::OperatorHandle> pointwise_inplace_variant(const c10::OperatorHandle& op) {
  if (!op.hasTag(at::Tag::pointwise)) return std::nullopt;
  const c10::FunctionSchema& schema = op.schema();
  if (!returns_one_fresh_tensor(schema) || schema.arguments().empty() ||
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

namespace {
// Every registered overload by base name ("aten::max" -> dim, dim_max, ...), read once: the out
// overloads follow no single naming rule (add.out, sum.IntList_out, max.dim_max, sort.values).
const std::vector<c10::OperatorName>& overloads_of(const std::string& name) {
  static const auto index = [] {
    std::unordered_map<std::string, std::vector<c10::OperatorName>> by_name;
    for (const c10::OperatorName& op : c10::Dispatcher::singleton().getAllOpNames()) by_name[op.name].push_back(op);
    return by_name;
  }();
  static const std::vector<c10::OperatorName> none;
  auto it = index.find(name);
  return it == index.end() ? none : it->second;
}

// `candidate` takes `functional`'s arguments, then one written Tensor per result.
bool is_out_form_of(const c10::FunctionSchema& candidate, const c10::FunctionSchema& functional) {
  const auto& formals = functional.arguments();
  const auto& arguments = candidate.arguments();
  const std::size_t num_results = functional.returns().size();
  if (arguments.size() != formals.size() + num_results || candidate.returns().size() != num_results) return false;
  for (std::size_t k = 0; k < formals.size(); ++k)
    if (arguments[k].name() != formals[k].name() || *arguments[k].type() != *formals[k].type() ||
        arguments[k].alias_info())
      return false;
  for (std::size_t k = formals.size(); k < arguments.size(); ++k)
    if (!arguments[k].is_out() || arguments[k].type()->kind() != c10::TypeKind::TensorType) return false;
  return true;
}
}  // namespace

std::optional<c10::OperatorHandle> out_variant(const c10::OperatorHandle& op, c10::DispatchKey backend) {
  const c10::FunctionSchema& schema = op.schema();
  if (!returns_one_fresh_tensor(schema) || op.hasTag(at::Tag::nondeterministic_seeded)) return std::nullopt;
  auto fits = [&](const c10::OperatorName& name) -> std::optional<c10::OperatorHandle> {
    if (name == op.operator_name()) return std::nullopt;
    auto candidate = c10::Dispatcher::singleton().findSchema(name);
    if (candidate && candidate->hasKernelForDispatchKey(backend) && is_out_form_of(candidate->schema(), schema))
      return candidate;
    return std::nullopt;
  };
  // torchgen's names first (they also find an op registered after the index was read), then any.
  const c10::OperatorName& functional = op.operator_name();
  const std::string overload = functional.overload_name;
  for (const std::string& name : {std::string("out"), overload + "_out"})
    if (auto out = fits({functional.name, name})) return out;
  for (const c10::OperatorName& name : overloads_of(functional.name))
    if (auto out = fits(name)) return out;
  return std::nullopt;
}

}  // namespace aotpipe
