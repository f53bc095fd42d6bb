#pragma once
// A per-thread cache of freed arrays, by size, for the hash tables every graph grows as it is
// built (its name index). A trace grows its table several times and frees it with the graph; past
// a kilobyte glibc serves such arrays from its sorted bins, consolidating its free lists first:
// the four growth steps of a 100-op trace's table cost more than the rest of the table's work.
// Here the next graph on the thread takes the arrays the last one freed. At most kPerSize arrays
// of each size and kMaxBytes in all are kept; the rest go back, and all of them at thread exit.
// Internal to the graph library (graph.cpp's name index).
#include <aotpipe/graph/block_cache.h>  // AOTPIPE_BLOCK_CACHE_ENABLED (off in sanitizer builds)

#include <array>
#include <cstddef>
#include <new>

namespace aotpipe {

class ArrayCache {
 public:
  static void* allocate(std::size_t bytes) {
    if (AOTPIPE_BLOCK_CACHE_ENABLED && state_ == State::Alive)
      for (Slot& slot : instance().slots_)
        if (slot.bytes == bytes && slot.count > 0) {
          instance().kept_bytes_ -= bytes;
          return slot.arrays[--slot.count];
        }
    return ::operator new(bytes);
  }

  static void deallocate(void* p, std::size_t bytes) noexcept {
    if (AOTPIPE_BLOCK_CACHE_ENABLED && state_ != State::Destroyed && bytes <= kMaxBytes) {
      ArrayCache& cache = instance();
      if (cache.kept_bytes_ + bytes <= kMaxBytes) {
        Slot* target = nullptr;  // the slot of this size, or else an empty one
        for (Slot& slot : cache.slots_) {
          if (slot.bytes == bytes) {
            target = &slot;
            break;
          }
          if (!target && slot.count == 0) target = &slot;
        }
        if (target && target->count < kPerSize) {
          target->bytes = bytes;
          target->arrays[target->count++] = p;
          cache.kept_bytes_ += bytes;
          return;
        }
      }
    }
    ::operator delete(p);
  }

 private:
  static constexpr std::size_t kPerSize = 2;          // a graph and the copy a pass makes of it
  static constexpr std::size_t kMaxBytes = 4u << 20;  // per thread
  struct Slot {
    std::size_t bytes = 0;
    std::size_t count = 0;
    std::array<void*, kPerSize> arrays{};
  };
  enum class State : unsigned char { Unmade, Alive, Destroyed };
  ArrayCache() { state_ = State::Alive; }
  ~ArrayCache() {
    state_ = State::Destroyed;  // arrays freed later (static destructors at exit) go straight back
    for (Slot& slot : slots_)
      for (std::size_t i = 0; i < slot.count; ++i) ::operator delete(slot.arrays[i]);
  }
  static ArrayCache& instance() {
    thread_local ArrayCache cache;
    return cache;
  }
  static inline thread_local State state_ = State::Unmade;
  std::array<Slot, 24> slots_{};  // tables double as they grow: one slot per size met
  std::size_t kept_bytes_ = 0;
};

// A std allocator drawing from the thread's ArrayCache (stateless: any two compare equal).
template <class T>
struct RecyclingAllocator {
  using value_type = T;
  RecyclingAllocator() = default;
  template <class U>
  RecyclingAllocator(const RecyclingAllocator<U>&) noexcept {}  // NOLINT(google-explicit-constructor)
  T* allocate(std::size_t n) { return static_cast<T*>(ArrayCache::allocate(n * sizeof(T))); }
  void deallocate(T* p, std::size_t n) noexcept { ArrayCache::deallocate(p, n * sizeof(T)); }
  template <class U>
  bool operator==(const RecyclingAllocator<U>&) const noexcept {
    return true;
  }
};

}  // namespace aotpipe
