#pragma once
// Autocast regions: the nodes torch.export recorded inside `with torch.autocast(...)` (its
// wrap_with_autocast higher-order op, enabled or not) carry attrs()["autocast"], and whoever runs
// such a node (the interpreter, and so every trace of it) runs it under that autocast state, so
// libtorch's own autocast kernels insert the casts eager inserts. See docs/export.md.
#include <aotpipe/graph/graph.h>

#include <c10/core/DeviceType.h>
#include <c10/core/ScalarType.h>

#include <optional>
#include <string>
#include <vector>

namespace aotpipe {

inline constexpr const char* kAutocastAttr = "autocast";

struct AutocastRegion {
  c10::DeviceType device_type = c10::DeviceType::CPU;  // autocast's device_type ("cpu", "cuda")
  bool enabled = false;
  std::optional<c10::ScalarType> dtype;  // nullopt: autocast's default for the device type

  // "cpu,BFloat16", "cuda,default", "cpu,off": the attribute's text.
  std::string to_attr() const;
  // The region of a node; nullopt outside any region. Throws GraphError on a malformed attribute.
  static std::optional<AutocastRegion> of(const Node& node);
  bool operator==(const AutocastRegion&) const = default;
};

// The autocast regions in effect on this thread for the device types aotpipe compiles for (CPU,
// CUDA), each with its dtype; empty when autocast is off. A trace records autocast's casts, so a
// compile made under one state must not serve a call under another (cache/cache_key.h,
// package/load_package.h).
std::vector<AutocastRegion> ambient_autocast();
// "" when autocast is off, else the regions' to_attr() texts, ";"-separated: "cpu,BFloat16".
std::string ambient_autocast_text();

// Sets this thread's autocast state to a region's for its lifetime (cache off: a cast is cached
// per autocast context in eager, and a cached tracing tensor would outlive its trace).
class AutocastGuard {
 public:
  explicit AutocastGuard(const AutocastRegion& region);
  ~AutocastGuard();
  AutocastGuard(const AutocastGuard&) = delete;
  AutocastGuard& operator=(const AutocastGuard&) = delete;

 private:
  c10::DeviceType device_type_;
  bool was_enabled_;
  c10::ScalarType previous_dtype_;
  bool previous_cache_;
};

}  // namespace aotpipe
