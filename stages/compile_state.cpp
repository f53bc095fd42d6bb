#include <aotpipe/stages/compile_state.h>

namespace aotpipe {

RuntimeFn apply_runtime_wrappers(const std::vector<RuntimeWrapper>& wrappers, RuntimeFn inner) {
  for (auto it = wrappers.rbegin(); it != wrappers.rend(); ++it) inner = it->wrap(std::move(inner));
  return inner;
}

}  // namespace aotpipe
