// Synthetic base's runtime half (its plan's post-compile wrapper and codec): what a stored
// artifact made callable links, the stage's analysis apart.
#include <aotpipe/stages/synthetic_base/synthetic_base.h>

#include <aotpipe/graph/byte_codec.h>
#include <aotpipe/stages/common/plan_codec.h>

#include <ATen/ATen.h>

#include <stdexcept>

namespace aotpipe {

RuntimeFn synthetic_base_post_compile(SyntheticBaseInfo info, RuntimeFn compiled) {
  if (!info.needed) return compiled;
  return [info = std::move(info), compiled = std::move(compiled)](TensorList args) {
    auto merged = merge_view_inputs(args, info.outer_input_info, info.is_inference);
    if (!merged)
      throw std::invalid_argument(
          "aotpipe synthetic base: the graph was compiled for aliased inputs, but this call's inputs do not alias "
          "(recompile for this input signature)");
    TensorList aliased;
    for (std::size_t i : info.aliased_arg_idx_with_metadata_mutations) aliased.push_back(args[i]);
    args.clear();
    TensorList outs = compiled(std::move(merged->args));
    if (aliased.empty()) return outs;
    const std::size_t num_user = outs.size() - aliased.size();
    for (std::size_t k = 0; k < aliased.size(); ++k) {
      const at::Tensor& mutated = outs[num_user + k];
      aliased[k].as_strided_(mutated.sizes(), mutated.strides(), mutated.storage_offset());
    }
    outs.resize(num_user);
    return outs;
  };
}

void WrapperTraits<SyntheticBaseInfo>::encode(ByteWriter& out, const SyntheticBaseInfo& info) {
  out.boolean(info.needed);
  out.boolean(info.is_inference);
  out.list(info.outer_input_info, [&](const InputAliasInfo& in) { encode_input_alias_info(out, in); });
  out.u64s(info.aliased_arg_idx_with_metadata_mutations);
}

SyntheticBaseInfo WrapperTraits<SyntheticBaseInfo>::decode(ByteReader& in) {
  SyntheticBaseInfo info;
  info.needed = in.boolean("synthetic base needed");
  info.is_inference = in.boolean("synthetic base is_inference");
  info.outer_input_info = in.list("synthetic base inputs", [&] { return decode_input_alias_info(in); });
  info.aliased_arg_idx_with_metadata_mutations = in.u64s("synthetic base aliased inputs");
  for (std::size_t i : info.aliased_arg_idx_with_metadata_mutations)
    if (i >= info.outer_input_info.size()) ByteReader::fail("synthetic base plan", "an index out of range");
  return info;
}

}  // namespace aotpipe
