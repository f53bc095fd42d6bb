#include <aotpipe/stages/compile_state.h>
#include <aotpipe/stages/dedupe/dedupe.h>
#include <aotpipe/stages/synthetic_base/synthetic_base.h>

namespace aotpipe {

RuntimeFn apply_runtime_wrappers(const std::vector<RuntimeWrapper>& wrappers, RuntimeFn inner) {
  for (auto it = wrappers.rbegin(); it != wrappers.rend(); ++it) inner = it->wrap(std::move(inner));
  return inner;
}

RuntimeWrapper runtime_wrapper(RuntimePlan plan) {
  struct WrapperOf {
    RuntimeWrapper operator()(const DedupeInfo& info) const {
      return {"dedupe", [info](RuntimeFn inner) { return dedupe_post_compile(info, std::move(inner)); }, info};
    }
    RuntimeWrapper operator()(const SyntheticBaseInfo& info) const {
      return {"synthetic_base", [info](RuntimeFn inner) { return synthetic_base_post_compile(info, std::move(inner)); },
              info};
    }
  };
  return std::visit(WrapperOf{}, plan);
}

Compiler named_compiler(std::string identity, Compiler compiler) {
  using Signature = CompiledGraph(const Graph&, const std::vector<TensorMeta>&);
  return Identified<Signature>{std::move(identity), std::move(compiler)};
}

}  // namespace aotpipe
