#include <aotpipe/stages/synthetic_base/synthetic_base.h>

#include <aotpipe/graph/byte_codec.h>
#include <aotpipe/stages/common/plan_codec.h>

#include <ATen/ATen.h>

#include <stdexcept>

namespace aotpipe {

SyntheticBaseResult synthetic_base_pre_compile(AnalyzedFunction function) {
  SyntheticBaseInfo info;
  info.is_inference = !function.needs_autograd;
  auto merged = merge_view_inputs(function.args, function.meta.input_info, info.is_inference);
  if (!merged) return {std::move(function), std::move(info)};
  info.needed = true;
  info.outer_input_info = function.meta.input_info;
  auto [meta, aliased_with_metadata_mutations] =
      create_synthetic_base_metadata(function.meta, merged->info, function.args, merged->args);
  info.aliased_arg_idx_with_metadata_mutations = aliased_with_metadata_mutations;
  function.meta = std::move(meta);
  function.args = std::move(merged->args);
  function.fn = [fn = std::move(function.fn), convention = std::move(merged->info),
                 extra = std::move(aliased_with_metadata_mutations)](const TensorList& args) {
    TensorList unpacked = unpack_synthetic_bases(args, convention);
    TensorList outs = fn(unpacked);
    // Aliased inputs whose metadata the function changed are returned, so the runtime can
    // replay the change on the caller's tensors (the synthetic base only carries data).
    for (std::size_t i : extra) outs.push_back(unpacked[i]);
    return outs;
  };
  return {std::move(function), std::move(info)};
}

}  // namespace aotpipe
