#include "cpu_memory_meter.h"

#include <c10/core/Allocator.h>
#include <c10/core/CPUAllocator.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <unistd.h>
#include <atomic>
#include <mutex>
#include <unordered_map>

namespace {

// Counted allocations keep context == data (as libtorch's own CPU allocator does), which
// Allocator::raw_allocate requires; the original deleter is remembered by address.
class MeteredCpuAllocator final : public c10::Allocator {
 public:
  explicit MeteredCpuAllocator(c10::Allocator* underlying) : underlying_(underlying) {}

  c10::DataPtr allocate(std::size_t nbytes) override {
    c10::DataPtr data = underlying_->allocate(nbytes);
    if (!enabled_.load(std::memory_order_relaxed) || !data.get() || data.get_context() != data.get()) return data;
    void* ptr = data.get();
    const c10::Device device = data.device();
    const c10::DeleterFnPtr deleter = data.get_deleter();
    data.release_context();
    {
      std::lock_guard lock(mutex_);
      counted_[ptr] = {nbytes, deleter};
      live_ += static_cast<std::int64_t>(nbytes);
      peak_ = std::max(peak_, live_);
      if (tracing_) trace_.push_back({static_cast<std::int64_t>(nbytes), live_, ptr});
    }
    return {ptr, ptr, &release, device};
  }

  c10::DeleterFnPtr raw_deleter() const override { return &release; }
  void copy_data(void* dest, const void* src, std::size_t count) const override { default_copy_data(dest, src, count); }

  void start() {
    std::lock_guard lock(mutex_);
    live_ = peak_ = 0;
    trace_.clear();
    tracing_ = std::getenv("AOTPIPE_METER_TRACE_DIR") != nullptr;
    enabled_ = true;
  }
  void stop() {
    enabled_ = false;
    std::lock_guard lock(mutex_);
    if (tracing_) write_trace();
  }
  std::int64_t live() {
    std::lock_guard lock(mutex_);
    return live_;
  }
  std::int64_t peak() {
    std::lock_guard lock(mutex_);
    return peak_;
  }

 private:
  struct Counted {
    std::size_t bytes;
    c10::DeleterFnPtr deleter;
  };

  static void release(void* ptr);

  // AOTPIPE_METER_TRACE_DIR: each measurement writes trace-<pid>-<n>.txt there, a line per allocation
  // (+bytes) and per free (-bytes) with the live bytes after it and the address, to see what a peak is made of.
  struct Event {
    std::int64_t bytes;
    std::int64_t live;
    const void* ptr;
  };
  void write_trace() {
    const std::string path = std::string(std::getenv("AOTPIPE_METER_TRACE_DIR")) + "/trace-" +
                             std::to_string(::getpid()) + "-" + std::to_string(traces_written_++) + ".txt";
    if (std::FILE* f = std::fopen(path.c_str(), "w")) {
      for (const Event& e : trace_)
        std::fprintf(f, "%+lld %lld %p\n", static_cast<long long>(e.bytes), static_cast<long long>(e.live), e.ptr);
      std::fclose(f);
    }
  }
  bool tracing_ = false;
  std::vector<Event> trace_;
  int traces_written_ = 0;

  c10::Allocator* underlying_;
  std::atomic<bool> enabled_{false};
  std::mutex mutex_;
  std::unordered_map<void*, Counted> counted_;
  std::int64_t live_ = 0;
  std::int64_t peak_ = 0;
  friend MeteredCpuAllocator& meter();
};

MeteredCpuAllocator& meter() {
  static MeteredCpuAllocator instance(c10::GetCPUAllocator());
  return instance;
}

void MeteredCpuAllocator::release(void* ptr) {
  MeteredCpuAllocator& m = meter();
  c10::DeleterFnPtr deleter = nullptr;
  {
    std::lock_guard lock(m.mutex_);
    auto it = m.counted_.find(ptr);
    if (it != m.counted_.end()) {
      m.live_ -= static_cast<std::int64_t>(it->second.bytes);
      if (m.tracing_ && m.enabled_) m.trace_.push_back({-static_cast<std::int64_t>(it->second.bytes), m.live_, ptr});
      deleter = it->second.deleter;
      m.counted_.erase(it);
    }
  }
  // A raw allocation made before the meter was enabled: the underlying allocator's own.
  (deleter ? deleter : m.underlying_->raw_deleter())(ptr);
}

// Above libtorch's default CPU allocator (priority 0), below the planned backend's hook.
constexpr std::uint8_t kMeterPriority = 100;

}  // namespace

extern "C" {

bool aotpipe_meter_install() {
  static const bool installed = [] {
    MeteredCpuAllocator& m = meter();
    c10::SetCPUAllocator(&m, kMeterPriority);
    return c10::GetCPUAllocator() == &m;
  }();
  return installed;
}

void aotpipe_meter_start() { meter().start(); }
void aotpipe_meter_stop() { meter().stop(); }
std::int64_t aotpipe_meter_live_bytes() { return meter().live(); }
std::int64_t aotpipe_meter_peak_bytes() { return meter().peak(); }
}
