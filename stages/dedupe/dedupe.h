#pragma once
// Stage 2, dedupe (AOTDedupeWrapper): the same tensor passed more than once.
//   Strategy 1: a duplicate that is not mutated becomes a separate leaf (a detached alias); the
//               compiled graph then takes distinct inputs, no runtime work.
//   Strategy 2: otherwise the duplicates are removed and the graph is specialized to the
//               deduplicated arguments; at run time keep_arg_mask drops them again.
// Either way the runtime half checks that a call has the duplicate pattern the graph was
// compiled for and names the inputs when it does not. See docs/stages/dedupe.md.
#include <aotpipe/stages/common/runtime_plans.h>
#include <aotpipe/stages/common/wrapper_stage.h>
#include <aotpipe/stages/compile_state.h>

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace aotpipe {

// Per argument, the first argument that is the same tensor object.
std::vector<std::size_t> duplicate_pattern(const TensorList& args);

// Throws std::invalid_argument naming the inputs when `args` do not have `info`'s pattern.
void check_duplicate_pattern(const DedupeInfo& info, const TensorList& args);

ViewAndMutationMeta remove_dupe_metadata(const ViewAndMutationMeta& meta, const std::vector<bool>& keep_arg_mask,
                                         const std::vector<std::size_t>& add_dupe_map);

// Pre-compile half: the function rewritten for distinct arguments, and the plan the
// post-compile half needs.
using DedupeResult = PreCompiled<DedupeInfo>;
DedupeResult dedupe_pre_compile(AnalyzedFunction function);
// Post-compile half: the outer callable around `compiled` (inner convention).
RuntimeFn dedupe_post_compile(DedupeInfo info, RuntimeFn compiled);

template <>
struct WrapperTraits<DedupeInfo> {
  static constexpr std::string_view name = "dedupe";
  static constexpr std::string_view summary = "drop inputs passed twice (the runtime passes one of them)";
  static DedupeResult pre_compile(AnalyzedFunction function) { return dedupe_pre_compile(std::move(function)); }
  static RuntimeFn post_compile(DedupeInfo info, RuntimeFn inner) {
    return dedupe_post_compile(std::move(info), std::move(inner));
  }
  static constexpr std::uint64_t codec_tag = 0;
  static void encode(ByteWriter& out, const DedupeInfo& info);
  static DedupeInfo decode(ByteReader& in);
  // No argument passed twice: the arguments are passed on as they came.
  static bool rewrites_function(const DedupeInfo& info) {
    for (std::size_t i = 0; i < info.first_occurrence.size(); ++i)
      if (info.first_occurrence[i] != i) return true;
    return false;
  }
};
using DedupeStage = WrapperStage<DedupeInfo>;

}  // namespace aotpipe
