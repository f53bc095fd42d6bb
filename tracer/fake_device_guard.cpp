#include <aotpipe/tracer/internal/fake_device_guard.h>

#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <mutex>

namespace aotpipe::detail {
namespace {

thread_local int tls_fake_depth = 0;
thread_local c10::DeviceIndex tls_fake_current_index = 0;

using c10::impl::DeviceGuardImplInterface;

class FakeAwareGuardImpl final : public DeviceGuardImplInterface {
 public:
  FakeAwareGuardImpl(c10::DeviceType type, const DeviceGuardImplInterface* real) : type_(type), real_(real) {}

  const DeviceGuardImplInterface* real() const { return real_; }

  c10::DeviceType type() const override { return type_; }

  c10::Device exchangeDevice(c10::Device d) const override {
    if (!fake()) return checked_real()->exchangeDevice(d);
    c10::Device old(type_, tls_fake_current_index);
    tls_fake_current_index = std::max<c10::DeviceIndex>(d.index(), 0);
    return old;
  }
  c10::Device getDevice() const override {
    if (!fake()) return checked_real()->getDevice();
    return c10::Device(type_, tls_fake_current_index);
  }
  void setDevice(c10::Device d) const override {
    if (!fake()) return checked_real()->setDevice(d);
    tls_fake_current_index = std::max<c10::DeviceIndex>(d.index(), 0);
  }
  void uncheckedSetDevice(c10::Device d) const noexcept override {
    if (!fake()) {
      if (real_) real_->uncheckedSetDevice(d);
      return;
    }
    tls_fake_current_index = std::max<c10::DeviceIndex>(d.index(), 0);
  }
  c10::Stream getStream(c10::Device d) const override {
    if (!fake()) return checked_real()->getStream(d);
    return default_stream(d);
  }
  c10::Stream getDefaultStream(c10::Device d) const override {
    if (!fake()) return checked_real()->getDefaultStream(d);
    return default_stream(d);
  }
  c10::Stream getStreamFromGlobalPool(c10::Device d, bool high_priority) const override {
    if (!fake()) return checked_real()->getStreamFromGlobalPool(d, high_priority);
    return default_stream(d);
  }
  c10::Stream getNewStream(c10::Device d, int priority) const override {
    if (!fake()) return checked_real()->getNewStream(d, priority);
    return default_stream(d);
  }
  c10::Stream exchangeStream(c10::Stream s) const override {
    if (!fake()) return checked_real()->exchangeStream(s);
    return default_stream(s.device());
  }
  void* getStreamNativeHandle(const c10::Stream s) const override {
    if (!fake()) return checked_real()->getStreamNativeHandle(s);
    return nullptr;
  }
  void destroyEvent(void* event, const c10::DeviceIndex index) const noexcept override {
    // Events are only ever created by the real implementation (fake record leaves them null).
    if (event && real_) real_->destroyEvent(event, index);
  }
  void record(void** event, const c10::Stream& stream, const c10::DeviceIndex index,
              const c10::EventFlag flag) const override {
    if (!fake()) return checked_real()->record(event, stream, index, flag);
  }
  void block(void* event, const c10::Stream& stream) const override {
    if (!fake()) return checked_real()->block(event, stream);
  }
  bool queryEvent(void* event) const override {
    if (!fake()) return checked_real()->queryEvent(event);
    return true;
  }
  c10::DeviceIndex deviceCount() const noexcept override { return real_ ? real_->deviceCount() : c10::DeviceIndex{0}; }
  c10::DeviceCapability getDeviceCapability(c10::Device d) const override {
    return checked_real()->getDeviceCapability(d);
  }
  bool queryStream(const c10::Stream& s) const override {
    if (!fake()) return checked_real()->queryStream(s);
    return true;
  }
  void synchronizeStream(const c10::Stream& s) const override {
    if (!fake()) checked_real()->synchronizeStream(s);
  }
  void synchronizeEvent(void* event) const override {
    if (!fake()) checked_real()->synchronizeEvent(event);
  }
  void synchronizeDevice(const c10::DeviceIndex index) const override {
    if (!fake()) checked_real()->synchronizeDevice(index);
  }
  void recordDataPtrOnStream(const c10::DataPtr& ptr, const c10::Stream& s) const override {
    if (!fake()) checked_real()->recordDataPtrOnStream(ptr, s);
  }
  double elapsedTime(void* start, void* end, const c10::DeviceIndex index) const override {
    return checked_real()->elapsedTime(start, end, index);
  }

 private:
  static bool fake() { return tls_fake_depth > 0; }
  c10::Stream default_stream(c10::Device d) const {
    return c10::Stream(c10::Stream::DEFAULT, c10::Device(type_, d.index() < 0 ? tls_fake_current_index : d.index()));
  }
  const DeviceGuardImplInterface* checked_real() const {
    // The message libtorch gives when no implementation is registered for the device type.
    TORCH_CHECK(real_, "PyTorch is not linked with support for ", type_, " devices");
    return real_;
  }

  c10::DeviceType type_;
  const DeviceGuardImplInterface* real_;
};

std::mutex install_mutex;
// Every wrapper ever installed: they stay alive (the registry holds raw pointers forever).
std::array<std::atomic<const FakeAwareGuardImpl*>,
           static_cast<std::size_t>(c10::DeviceType::COMPILE_TIME_MAX_DEVICE_TYPES)>
    installed{};

}  // namespace

FakeDeviceScope::FakeDeviceScope() { ++tls_fake_depth; }
FakeDeviceScope::~FakeDeviceScope() { --tls_fake_depth; }
bool FakeDeviceScope::active() { return tls_fake_depth > 0; }

void install_fake_device_guard(c10::DeviceType type) {
  if (type == c10::kCPU || type == c10::kMeta) return;
  const auto slot = static_cast<std::size_t>(type) & 0xFF;
  auto& registry = c10::impl::device_guard_impl_registry[slot];
  if (registry.load() == installed[slot].load() && registry.load() != nullptr) return;  // fast path
  std::lock_guard lock(install_mutex);
  const DeviceGuardImplInterface* current = registry.load();
  if (current != nullptr && current == installed[slot].load()) return;
  auto* wrapper = new FakeAwareGuardImpl(type, current);  // NOLINT: lives for the process, like libtorch's own
  installed[slot].store(wrapper);
  registry.store(wrapper);
}

}  // namespace aotpipe::detail
