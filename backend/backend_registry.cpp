#include <aotpipe/backend/backend_registry.h>
#include <aotpipe/backend/backends.h>

#include <map>
#include <mutex>

namespace aotpipe {

namespace {
struct Registry {
  std::mutex mutex;
  std::map<std::string, BackendFactory, std::less<>> factories{
      {"interpreter", [] { return backends::interpreter(); }},
      {"planned", [] { return backends::planned_interpreter(); }}};
};
// Made on first use: backends register from static initializers of other libraries.
Registry& registry() {
  static Registry instance;
  return instance;
}
}  // namespace

bool register_backend(std::string name, BackendFactory make) {
  Registry& r = registry();
  const std::lock_guard lock(r.mutex);
  r.factories.insert_or_assign(std::move(name), std::move(make));
  return true;
}

std::optional<Compiler> find_backend(std::string_view name) {
  BackendFactory make;
  {
    Registry& r = registry();
    const std::lock_guard lock(r.mutex);
    const auto it = r.factories.find(name);
    if (it == r.factories.end()) return std::nullopt;
    make = it->second;
  }
  return make();
}

std::vector<std::string> registered_backends() {
  Registry& r = registry();
  const std::lock_guard lock(r.mutex);
  std::vector<std::string> names;
  names.reserve(r.factories.size());
  for (const auto& entry : r.factories) names.push_back(entry.first);
  return names;
}

}  // namespace aotpipe
