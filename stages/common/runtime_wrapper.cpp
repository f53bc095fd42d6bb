// The built-in analysis stages' runtime wrappers (compile_state.h's runtime_wrapper and
// apply_runtime_wrappers): what post_compile runs around a compiled artifact, compile-time
// stage code apart (a package's runtime links this, not the stages).
#include <aotpipe/stages/compile_state.h>
#include <aotpipe/stages/dedupe/dedupe.h>
#include <aotpipe/stages/synthetic_base/synthetic_base.h>

namespace aotpipe {

RuntimeFn apply_runtime_wrappers(const std::vector<RuntimeWrapper>& wrappers, RuntimeFn inner) {
  for (auto it = wrappers.rbegin(); it != wrappers.rend(); ++it) inner = it->wrap(std::move(inner));
  return inner;
}

// Every plan's wrapper from its WrapperTraits (stages/common/wrapper_stage.h).
RuntimeWrapper runtime_wrapper(RuntimePlan plan) {
  return std::visit(
      [](const auto& info) -> RuntimeWrapper {
        using Traits = WrapperTraits<std::decay_t<decltype(info)>>;
        return {std::string(Traits::name),
                [info](RuntimeFn inner) { return Traits::post_compile(info, std::move(inner)); }, info};
      },
      plan);
}

}  // namespace aotpipe
