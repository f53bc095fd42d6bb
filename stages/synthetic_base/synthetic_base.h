#pragma once
// Stage 3, synthetic base (AOTSyntheticBaseWrapper). Pre-compile: merge aliased inputs of which
// one is mutated into a synthetic base and make the function regenerate them as views; aliased
// inputs with metadata mutations become extra outputs. Post-compile: merge the caller's inputs
// the same way, call, and apply those metadata mutations with as_strided_. See
// docs/stages/synthetic_base.md.
#include <aotpipe/stages/common/runtime_plans.h>
#include <aotpipe/stages/common/wrapper_stage.h>
#include <aotpipe/stages/compile_state.h>
#include <aotpipe/stages/synthetic_base/merge_view_inputs.h>

#include <cstdint>
#include <string_view>

namespace aotpipe {

// Pre-compile half: the function over the merged arguments, and the plan the post-compile half
// needs (plan.needed false, function unchanged: no aliased input is mutated).
using SyntheticBaseResult = PreCompiled<SyntheticBaseInfo>;
SyntheticBaseResult synthetic_base_pre_compile(AnalyzedFunction function);
RuntimeFn synthetic_base_post_compile(SyntheticBaseInfo info, RuntimeFn compiled);

template <>
struct WrapperTraits<SyntheticBaseInfo> {
  static constexpr std::string_view name = "synthetic_base";
  static constexpr std::string_view summary = "merge aliased inputs of which one is mutated into one synthetic base";
  static SyntheticBaseResult pre_compile(AnalyzedFunction function) {
    return synthetic_base_pre_compile(std::move(function));
  }
  static RuntimeFn post_compile(SyntheticBaseInfo info, RuntimeFn inner) {
    return synthetic_base_post_compile(std::move(info), std::move(inner));
  }
  static bool rewrites_function(const SyntheticBaseInfo& info) { return info.needed; }
  static constexpr std::uint64_t codec_tag = 1;
  static void encode(ByteWriter& out, const SyntheticBaseInfo& info);
  static SyntheticBaseInfo decode(ByteReader& in);
};
using SyntheticBaseStage = WrapperStage<SyntheticBaseInfo>;

}  // namespace aotpipe
