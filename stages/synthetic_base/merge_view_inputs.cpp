#include <aotpipe/stages/common/aliasing.h>
#include <aotpipe/stages/synthetic_base/merge_view_inputs.h>

#include <ATen/ATen.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <map>
#include <stdexcept>
#include <unordered_map>

namespace aotpipe {
namespace {

at::Tensor base_of(const at::Tensor& t) { return t.is_view() ? at::Tensor(t._base()) : at::Tensor(); }

bool are_differentiable_views(const at::Tensor& a, const at::Tensor& b) {
  if (a.is_same(b)) return true;
  const at::Tensor ba = base_of(a), bb = base_of(b);
  if (!ba.defined() && !bb.defined()) return false;
  return (ba.defined() && bb.defined() && ba.is_same(bb)) || (ba.defined() && ba.is_same(b)) ||
         (bb.defined() && a.is_same(bb));
}

bool same_dtype_views(const at::Tensor& a, const at::Tensor& b) {
  if (a.scalar_type() != b.scalar_type()) return false;
  if (auto ba = base_of(a); ba.defined() && ba.scalar_type() != a.scalar_type()) return false;
  if (auto bb = base_of(b); bb.defined() && bb.scalar_type() != b.scalar_type()) return false;
  return true;
}

}  // namespace

std::optional<MergedInputs> merge_view_inputs(const TensorList& args, const std::vector<InputAliasInfo>& input_info,
                                              bool is_inference) {
  if (args.size() != input_info.size())
    throw std::logic_error(
        fmt::format("merge_view_inputs: {} arguments but metadata for {}", args.size(), input_info.size()));
  bool any_data_mutation = false;
  for (const auto& in : input_info) any_data_mutation |= in.mutates_data;
  if (!any_data_mutation) return std::nullopt;

  // Storage groups in order of first appearance.
  std::vector<std::vector<std::size_t>> groups;
  std::unordered_map<const c10::StorageImpl*, std::size_t> group_of;
  std::vector<std::size_t> undefined_args;
  for (std::size_t i = 0; i < args.size(); ++i) {
    if (!args[i].defined()) {
      undefined_args.push_back(i);
      continue;
    }
    auto [it, fresh] = group_of.emplace(args[i].storage().unsafeGetStorageImpl(), groups.size());
    if (fresh) groups.emplace_back();
    groups[it->second].push_back(i);
  }

  MergedInputs merged;
  TensorList base_args, other_args;
  std::vector<std::string> base_desc;    // other args are described once a base exists
  std::vector<std::size_t> other_outer;  // outer index of each other arg
  std::map<std::size_t, SyntheticBaseArg> convention;
  for (std::size_t i : undefined_args) {
    other_args.push_back(args[i]);
    other_outer.push_back(i);
  }
  for (const auto& group : groups) {
    bool mutated = false;
    for (std::size_t i : group) mutated |= input_info[i].mutates_data;
    // Only data mutations affect every alias; metadata mutations need no synthetic base. And
    // false aliasing (one storage, no overlapping elements) keeps the inputs separate.
    if (group.size() <= 1 || !mutated || compute_overlapping_inputs(args, group).size() <= 1) {
      for (std::size_t i : group) {
        other_args.push_back(args[i]);
        other_outer.push_back(i);
      }
      continue;
    }
    for (std::size_t k = 0; k + 1 < group.size(); ++k) {
      const at::Tensor& v1 = args[group[k]];
      const at::Tensor& v2 = args[group[k + 1]];
      if (!is_inference && !are_differentiable_views(v1, v2))
        throw std::invalid_argument(fmt::format(
            "aotpipe synthetic base: inputs {} and {} alias one storage and one of them is mutated, but they are "
            "not views of one differentiable base; aot_autograd() does not yet handle non-differentiable view "
            "input mutations",
            group[k], group[k + 1]));
      if (!same_dtype_views(v1, v2))
        throw std::invalid_argument(fmt::format(
            "aotpipe synthetic base: inputs {} and {} alias one storage with different dtypes ({} vs {}) and one "
            "of them is mutated; aot_autograd() does not yet handle input mutations on views with different dtypes",
            group[k], group[k + 1], c10::toString(v1.scalar_type()), c10::toString(v2.scalar_type())));
    }
    at::Tensor synthetic_base;
    std::vector<std::size_t> with_base;
    for (std::size_t i : group)
      if (base_of(args[i]).defined()) with_base.push_back(i);
    if (with_base.empty()) {
      // No alias knows its base: one built from the storage (1-D; views are regenerated with
      // as_strided, so its shape does not matter).
      const at::Tensor& example = args[group.front()];
      synthetic_base = at::empty({0}, example.options().requires_grad(false)).set_(example.storage());
    } else {
      synthetic_base = base_of(args[with_base.front()]);
      for (std::size_t i : group) {
        const at::Tensor b = base_of(args[i]);
        if ((b.defined() && !b.is_same(synthetic_base)) || (!b.defined() && !args[i].is_same(synthetic_base)))
          throw std::invalid_argument(fmt::format(
              "aotpipe synthetic base: input {} aliases a mutated input but has a different differentiable base; "
              "aot_autograd() does not yet handle non-differentiable view input mutations",
              i));
      }
    }
    base_args.push_back(synthetic_base);
    base_desc.push_back(fmt::format("synthetic base of inputs {}", fmt::join(group, ", ")));
    for (std::size_t i : group) {
      TensorMeta view = TensorMeta::of(args[i]);
      convention[i] = ViewOfSyntheticBase{base_args.size() - 1, view, args[i].requires_grad()};
    }
  }
  if (base_args.empty()) return std::nullopt;
  for (std::size_t k = 0; k < other_args.size(); ++k) convention[other_outer[k]] = base_args.size() + k;
  merged.args = std::move(base_args);
  merged.args.insert(merged.args.end(), other_args.begin(), other_args.end());
  merged.descriptions = std::move(base_desc);
  for (std::size_t i : other_outer) merged.descriptions.push_back(fmt::format("input {}", i));
  for (std::size_t i = 0; i < args.size(); ++i) merged.info.push_back(convention.at(i));
  return merged;
}

TensorList unpack_synthetic_bases(const TensorList& merged, const std::vector<SyntheticBaseArg>& info) {
  TensorList out;
  out.reserve(info.size());
  for (const auto& arg : info) {
    if (const auto* idx = std::get_if<std::size_t>(&arg))
      out.push_back(merged[*idx]);
    else {
      const auto& v = std::get<ViewOfSyntheticBase>(arg);
      out.push_back(gen_alias_from_base(merged[v.base_idx], v.view, v.requires_grad));
    }
  }
  return out;
}

std::pair<ViewAndMutationMeta, std::vector<std::size_t>> create_synthetic_base_metadata(
    const ViewAndMutationMeta& m, const std::vector<SyntheticBaseArg>& info, const TensorList& outer_args,
    const TensorList& inner_args) {
  auto inner_of = [&](std::size_t outer) {
    if (const auto* idx = std::get_if<std::size_t>(&info[outer])) return *idx;
    return std::get<ViewOfSyntheticBase>(info[outer]).base_idx;
  };
  ViewAndMutationMeta out;
  out.keep_input_mutations = m.keep_input_mutations;
  out.is_train = m.is_train;
  out.grad_enabled_mutation = m.grad_enabled_mutation;
  out.num_intermediate_bases = m.num_intermediate_bases;
  for (std::size_t inner = 0; inner < inner_args.size(); ++inner) {
    std::vector<std::size_t> outer_indices;
    for (std::size_t o = 0; o < info.size(); ++o)
      if (inner_of(o) == inner) outer_indices.push_back(o);
    if (outer_indices.empty()) throw std::logic_error("create_synthetic_base_metadata: an unused inner argument");
    bool any_leaf = false, all_leaf = true, requires_grad = false, no_grad = true, hidden = true;
    for (std::size_t o : outer_indices) {
      const auto& in = m.input_info[o];
      any_leaf |= in.is_leaf;
      all_leaf &= in.is_leaf;
      requires_grad |= in.requires_grad;
      no_grad &= in.mutations_under_no_grad_or_inference_mode;
      hidden &= in.mutations_hidden_from_autograd;
    }
    if (any_leaf != all_leaf)
      throw std::invalid_argument(
          "aotpipe synthetic base: aliased inputs mix leaves and non-leaves; this is not supported (as in PyTorch)");
    const bool single = outer_indices.size() == 1;
    const auto& first = m.input_info[outer_indices.front()];
    InputAliasInfo in;
    in.is_leaf = any_leaf;
    in.mutates_data = single ? first.mutates_data : true;
    in.mutates_metadata = single ? first.mutates_metadata : false;
    in.mutates_storage_metadata = single ? first.mutates_storage_metadata : false;
    in.mutations_hidden_from_autograd = hidden;
    in.mutations_under_no_grad_or_inference_mode = no_grad;
    in.requires_grad = requires_grad;
    in.keep_input_mutations = m.keep_input_mutations;
    out.input_info.push_back(in);
  }
  std::vector<std::size_t> aliased_with_metadata_mutations;
  for (std::size_t o = 0; o < m.input_info.size(); ++o)
    if (m.input_info[o].mutates_metadata && std::holds_alternative<ViewOfSyntheticBase>(info[o]))
      aliased_with_metadata_mutations.push_back(o);
  for (OutputAliasInfo o : m.output_info) {
    const bool aliases_input = o.output_type == OutputType::alias_of_input || o.output_type == OutputType::is_input;
    if (o.base_idx && aliases_input) {
      const std::size_t new_base = inner_of(*o.base_idx);
      if (o.output_type == OutputType::is_input && new_base != *o.base_idx) o.output_type = OutputType::alias_of_input;
      // An input regenerated from a synthetic base is no longer an input itself.
      if (o.output_type == OutputType::is_input && std::holds_alternative<ViewOfSyntheticBase>(info[*o.base_idx]))
        o.output_type = OutputType::alias_of_input;
      o.base_idx = new_base;
    }
    out.output_info.push_back(std::move(o));
  }
  for (std::size_t o : aliased_with_metadata_mutations) {
    OutputAliasInfo extra;
    extra.output_type = OutputType::alias_of_input;
    extra.base_idx = std::get<ViewOfSyntheticBase>(info[o]).base_idx;
    extra.requires_grad = outer_args[o].requires_grad();
    extra.meta = TensorMeta::of(outer_args[o]);
    out.output_info.push_back(std::move(extra));
  }
  // Tangents: one per data-mutated inner input that requires grad, then the old non-input ones.
  std::size_t old_input_tangents = 0;
  for (const auto& in : m.input_info)
    if (in.gets_tangent()) ++old_input_tangents;
  for (std::size_t inner = 0; inner < inner_args.size(); ++inner)
    if (out.input_info[inner].mutates_data && out.input_info[inner].requires_grad)
      out.traced_tangents.push_back(TensorMeta::contiguous(
          inner_args[inner].sizes().vec(), inner_args[inner].scalar_type(), inner_args[inner].device()));
  for (std::size_t t = old_input_tangents; t < m.traced_tangents.size(); ++t)
    out.traced_tangents.push_back(m.traced_tangents[t]);
  out.finalize();
  return {std::move(out), std::move(aliased_with_metadata_mutations)};
}

}  // namespace aotpipe
