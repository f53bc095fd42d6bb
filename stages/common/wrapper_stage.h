#pragma once
// WrapperStage<Plan>: an analysis stage in the form of PyTorch's CompilerWrapper. Its
// pre-compile half rewrites the AnalyzedFunction for the stages after it and returns a plan;
// its post-compile half is built from that plan alone (runtime_wrapper), so a cached compile
// rebuilds it without running the stage. A stage of this form declares its plan's traits
// beside the plan (dedupe/dedupe.h, synthetic_base/synthetic_base.h) and gets its pipeline
// form, its runtime wrapper and its place in RuntimePlan from them.
#include <aotpipe/pipeline/job_env.h>
#include <aotpipe/pipeline/task.h>
#include <aotpipe/stages/common/stage_entry.h>
#include <aotpipe/stages/compile_state.h>

#include <concepts>
#include <cstdint>
#include <string_view>
#include <utility>

namespace aotpipe {

class ByteWriter;  // graph/byte_codec.h
class ByteReader;

// A pre-compile half's result: the function as the next stage sees it, and the plan.
template <class Plan>
struct PreCompiled {
  AnalyzedFunction function;
  Plan plan;
};

// Specialized beside each plan type:
//   static constexpr std::string_view name;                      // the stage's pipeline name
//   static constexpr std::string_view summary;                   // one line: what it does
//   static PreCompiled<Plan> pre_compile(AnalyzedFunction);      // the stage's work
//   static RuntimeFn post_compile(Plan, RuntimeFn inner);        // inner convention -> outer
//   static bool rewrites_function(const Plan&);                  // false: the function passed on
//                                                                // as it came (analyses of it stay)
//   static constexpr std::uint64_t codec_tag;                    // the plan's kind in an artifact's
//                                                                // header (never reused)
//   static void encode(ByteWriter&, const Plan&);                // the plan's bytes there, and
//   static Plan decode(ByteReader&);                             // back, checked (throws when
//                                                                // malformed; plan_codec.h)
template <class Plan>
struct WrapperTraits;

template <class Plan>
concept WrapperPlan = requires(AnalyzedFunction function, Plan plan, RuntimeFn inner, ByteWriter& out, ByteReader& in) {
  { WrapperTraits<Plan>::name } -> std::convertible_to<std::string_view>;
  { WrapperTraits<Plan>::summary } -> std::convertible_to<std::string_view>;
  { WrapperTraits<Plan>::pre_compile(std::move(function)) } -> std::same_as<PreCompiled<Plan>>;
  { WrapperTraits<Plan>::post_compile(std::move(plan), std::move(inner)) } -> std::same_as<RuntimeFn>;
  { WrapperTraits<Plan>::rewrites_function(plan) } -> std::same_as<bool>;
  { WrapperTraits<Plan>::codec_tag } -> std::convertible_to<std::uint64_t>;
  WrapperTraits<Plan>::encode(out, plan);
  { WrapperTraits<Plan>::decode(in) } -> std::same_as<Plan>;
};

// The pipeline form: replaces state.function and pushes the plan's runtime wrapper. The
// analyses of the function are preserved when the plan left it as it was.
template <WrapperPlan Plan>
struct WrapperStage {
  static CompileStageEntry entry() {
    return entry_without_parameters<WrapperStage>(WrapperTraits<Plan>::name, WrapperTraits<Plan>::summary);
  }
  std::string_view name() const { return WrapperTraits<Plan>::name; }
  Task<PreservedAnalyses> run(CompileState& state, const JobEnv&) const {
    PreCompiled<Plan> result = WrapperTraits<Plan>::pre_compile(std::move(state.function));
    const bool rewritten = WrapperTraits<Plan>::rewrites_function(result.plan);
    state.function = std::move(result.function);
    state.wrappers.push_back(runtime_wrapper(RuntimePlan(std::move(result.plan))));
    co_return rewritten ? PreservedAnalyses::none() : PreservedAnalyses::all();
  }
};

}  // namespace aotpipe
