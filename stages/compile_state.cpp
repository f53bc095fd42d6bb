#include <aotpipe/stages/compile_state.h>
#include <aotpipe/stages/dedupe/dedupe.h>
#include <aotpipe/stages/partition/min_cut_partition.h>
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

AotConfig resolve_defaults(AotConfig config) {
  if (!config.fw_compiler) config.fw_compiler = backends::interpreter();
  if (!config.bw_compiler) config.bw_compiler = config.fw_compiler;
  if (!config.inference_compiler) config.inference_compiler = config.fw_compiler;
  if (!config.partition_fn) config.partition_fn = partitioners::min_cut_rematerialization_partition();
  return config;
}

}  // namespace aotpipe
