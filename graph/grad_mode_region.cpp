#include <aotpipe/graph/grad_mode_region.h>

#include <fmt/format.h>

namespace aotpipe {

std::optional<bool> grad_mode_region_of(const Node& node) {
  auto it = node.attrs().find(kGradEnabledAttr);
  if (it == node.attrs().end()) return std::nullopt;
  if (it->second == "on") return true;
  if (it->second == "off") return false;
  throw GraphError(
      fmt::format("{}: attribute {}=\"{}\": expected \"on\" or \"off\"", node.label(), kGradEnabledAttr, it->second));
}

}  // namespace aotpipe
