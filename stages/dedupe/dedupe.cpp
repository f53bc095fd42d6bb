#include <aotpipe/stages/dedupe/dedupe.h>

#include <aotpipe/graph/byte_codec.h>

#include <fmt/format.h>

#include <stdexcept>
#include <unordered_map>

namespace aotpipe {

ViewAndMutationMeta remove_dupe_metadata(const ViewAndMutationMeta& m, const std::vector<bool>& keep_arg_mask,
                                         const std::vector<std::size_t>& add_dupe_map) {
  if (m.input_info.size() != keep_arg_mask.size() || keep_arg_mask.empty() || !keep_arg_mask[0])
    throw std::logic_error("remove_dupe_metadata: keep_arg_mask does not match the metadata");
  ViewAndMutationMeta out;
  out.keep_input_mutations = m.keep_input_mutations;
  out.is_train = m.is_train;
  out.grad_enabled_mutation = m.grad_enabled_mutation;
  out.num_intermediate_bases = m.num_intermediate_bases;
  for (std::size_t i = 0; i < m.input_info.size(); ++i)
    if (keep_arg_mask[i]) out.input_info.push_back(m.input_info[i]);
  for (OutputAliasInfo o : m.output_info) {
    if (o.base_idx && (o.output_type == OutputType::alias_of_input || o.output_type == OutputType::is_input))
      o.base_idx = add_dupe_map[*o.base_idx];
    out.output_info.push_back(std::move(o));
  }
  // The leading tangents belong to data-mutated inputs that require grad; drop the removed ones.
  std::size_t num_input_tangents = 0;
  std::vector<bool> keep_tangent;
  for (std::size_t i = 0; i < m.input_info.size(); ++i) {
    if (m.input_info[i].gets_tangent()) {
      keep_tangent.push_back(keep_arg_mask[i]);
      ++num_input_tangents;
    }
  }
  for (std::size_t t = 0; t < m.traced_tangents.size(); ++t)
    if (t >= num_input_tangents || keep_tangent[t]) out.traced_tangents.push_back(m.traced_tangents[t]);
  out.finalize();
  return out;
}

DedupeResult dedupe_pre_compile(AnalyzedFunction function) {
  DedupeInfo info;
  info.first_occurrence = duplicate_pattern(function.args);
  const std::size_t n = function.args.size();
  info.keep_arg_mask.assign(n, true);
  info.add_dupe_map.resize(n);
  for (std::size_t i = 0; i < n; ++i) info.add_dupe_map[i] = i;

  // Strategy 1: every duplicate is unmutated -> give it its own leaf.
  bool ok = true;
  TensorList leaf_args;
  for (std::size_t i = 0; i < n && ok; ++i) {
    const at::Tensor& a = function.args[i];
    const auto& in = function.meta.input_info[i];
    if (info.first_occurrence[i] == i)
      leaf_args.push_back(a);
    else if (!in.mutates_data && !in.mutates_metadata)
      leaf_args.push_back(a.detach().requires_grad_(a.requires_grad()));
    else
      ok = false;
  }
  if (ok) {
    function.args = std::move(leaf_args);
    return {std::move(function), std::move(info)};
  }

  // Strategy 2: specialize the graph to the deduplicated arguments.
  std::size_t j = 0;
  std::vector<std::size_t> inner_index(n);
  for (std::size_t i = 0; i < n; ++i) {
    if (info.first_occurrence[i] != i) {
      info.keep_arg_mask[i] = false;
      info.add_dupe_map[i] = inner_index[info.first_occurrence[i]];
      continue;
    }
    inner_index[i] = j;
    info.add_dupe_map[i] = j++;
  }
  info.specialized = true;
  function.meta = remove_dupe_metadata(function.meta, info.keep_arg_mask, info.add_dupe_map);
  function.args = info.remove_dupe_args(std::move(function.args));
  function.fn = [fn = std::move(function.fn), info](const TensorList& args) { return fn(info.add_dupe_args(args)); };
  return {std::move(function), std::move(info)};
}

}  // namespace aotpipe
