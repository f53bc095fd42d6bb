#pragma once
// Grad-mode regions: the nodes torch.export recorded inside `with torch.no_grad():` in a
// training-IR forward (its wrap_with_set_grad_enabled higher-order op; an enabling region nested
// in a disabling one too) carry attrs()["grad_enabled"], "off" or "on" (the innermost region's),
// and whoever runs such a node (the interpreter, and so every trace of it) runs it under that
// grad mode, as eager ran it: what it computes does not require grad, and an in-place op in it
// writes into a tensor that requires grad without touching that tensor's history. See
// docs/export.md.
#include <aotpipe/graph/graph.h>

#include <optional>

namespace aotpipe {

inline constexpr const char* kGradEnabledAttr = "grad_enabled";

// The grad mode of a node's region; nullopt outside any region. Throws GraphError on a malformed
// attribute.
std::optional<bool> grad_mode_region_of(const Node& node);

// The attribute's text for a region's grad mode.
inline const char* grad_mode_region_text(bool enabled) { return enabled ? "on" : "off"; }

}  // namespace aotpipe
