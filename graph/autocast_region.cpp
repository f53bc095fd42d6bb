#include <aotpipe/graph/autocast_region.h>

#include <ATen/autocast_mode.h>
#include <c10/core/Device.h>
#include <fmt/format.h>

namespace aotpipe {

std::string AutocastRegion::to_attr() const {
  const std::string device = c10::DeviceTypeName(device_type, /*lower_case=*/true);
  if (!enabled) return device + ",off";
  return device + "," + (dtype ? std::string(c10::toString(*dtype)) : std::string("default"));
}

std::optional<AutocastRegion> AutocastRegion::of(const Node& node) {
  auto it = node.attrs().find(kAutocastAttr);
  if (it == node.attrs().end()) return std::nullopt;
  const std::string& text = it->second;
  const std::size_t comma = text.find(',');
  auto malformed = [&](const std::string& why) {
    return GraphError(fmt::format("{}: attribute {}=\"{}\": {}", node.label(), kAutocastAttr, text, why));
  };
  if (comma == std::string::npos) throw malformed("expected \"<device type>,<dtype>|default|off\"");
  AutocastRegion region;
  try {
    region.device_type = c10::Device(text.substr(0, comma)).type();
  } catch (const std::exception&) { throw malformed("unknown device type"); }
  const std::string state = text.substr(comma + 1);
  region.enabled = state != "off";
  if (region.enabled && state != "default") {
    for (int i = 0; i < static_cast<int>(c10::ScalarType::NumOptions); ++i) {
      const auto type = static_cast<c10::ScalarType>(i);
      if (state == c10::toString(type)) region.dtype = type;
    }
    if (!region.dtype) throw malformed("unknown dtype");
  }
  return region;
}

std::vector<AutocastRegion> ambient_autocast() {
  std::vector<AutocastRegion> regions;
  for (const c10::DeviceType device : {c10::DeviceType::CPU, c10::DeviceType::CUDA})
    if (at::autocast::is_autocast_enabled(device))
      regions.push_back({device, /*enabled=*/true, at::autocast::get_autocast_dtype(device)});
  return regions;
}

std::string ambient_autocast_text() {
  std::string text;
  for (const AutocastRegion& region : ambient_autocast()) text += (text.empty() ? "" : ";") + region.to_attr();
  return text;
}

AutocastGuard::AutocastGuard(const AutocastRegion& region)
    : device_type_(region.device_type),
      was_enabled_(at::autocast::is_autocast_enabled(region.device_type)),
      previous_dtype_(at::autocast::get_autocast_dtype(region.device_type)),
      previous_cache_(at::autocast::is_autocast_cache_enabled()) {
  at::autocast::set_autocast_cache_enabled(false);
  at::autocast::set_autocast_enabled(device_type_, region.enabled);
  if (region.dtype) at::autocast::set_autocast_dtype(device_type_, *region.dtype);
}

AutocastGuard::~AutocastGuard() {
  at::autocast::set_autocast_enabled(device_type_, was_enabled_);
  at::autocast::set_autocast_dtype(device_type_, previous_dtype_);
  at::autocast::set_autocast_cache_enabled(previous_cache_);
}

}  // namespace aotpipe
