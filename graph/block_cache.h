#pragma once
// A per-thread cache of freed memory blocks of one size, for objects that a trace or a graph makes
// one of per recorded op and frees in bulk (tracing tensors, graph nodes and values). glibc's
// allocator keeps only 7 freed blocks per size in its per-thread cache; objects larger than its
// fast bins (128 bytes) beyond those go through its sorted bins, which coalesce on free and search
// on allocation: the slowest path of a trace. Blocks freed on another thread join that thread's
// cache; each thread keeps at most kMaxBlocks and returns the rest, and its own at exit.
#include <cstddef>
#include <new>
#include <vector>

// Sanitizer builds allocate every block afresh, so that use after free and races stay visible.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define AOTPIPE_BLOCK_CACHE_ENABLED 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define AOTPIPE_BLOCK_CACHE_ENABLED 0
#endif
#endif
#ifndef AOTPIPE_BLOCK_CACHE_ENABLED
#define AOTPIPE_BLOCK_CACHE_ENABLED 1
#endif

namespace aotpipe {

// A class's operator new and delete (through BlockAllocated below): blocks of sizeof(T) come
// from the cache; other sizes (from derived classes) pass through to the global operators.
template <class T, std::size_t kMaxBlocks = 4096>
class BlockCache {
 public:
  static void* allocate(std::size_t size) {
    if (AOTPIPE_BLOCK_CACHE_ENABLED && size == sizeof(T) && state_ != State::Destroyed) {
      auto& blocks = instance().blocks_;
      if (!blocks.empty()) {
        void* p = blocks.back();
        blocks.pop_back();
        return p;
      }
    }
    return ::operator new(size);
  }

  static void deallocate(void* p, std::size_t size) noexcept {
    if (AOTPIPE_BLOCK_CACHE_ENABLED && size == sizeof(T) && state_ != State::Destroyed) {
      auto& blocks = instance().blocks_;
      if (blocks.size() < blocks.capacity() || (blocks.size() < kMaxBlocks && grow(blocks))) {
        blocks.push_back(p);
        return;
      }
    }
    ::operator delete(p);
  }

 private:
  enum class State : unsigned char { Unmade, Alive, Destroyed };
  BlockCache() { state_ = State::Alive; }
  ~BlockCache() {
    state_ = State::Destroyed;  // blocks freed later (static destructors at exit) go straight back
    for (void* p : blocks_) ::operator delete(p);
  }
  static BlockCache& instance() {
    thread_local BlockCache cache;
    return cache;
  }
  static bool grow(std::vector<void*>& blocks) noexcept {
    try {
      blocks.reserve(blocks.empty() ? 64 : 2 * blocks.capacity());
      return true;
    } catch (...) {
      return false;  // no room to remember the block: it is freed instead
    }
  }
  // Trivially destructible, so it can still be read once the cache itself is destroyed.
  static inline thread_local State state_ = State::Unmade;
  std::vector<void*> blocks_;
};

// A base that makes BlockCache<T> the operator new and delete of T, the class deriving from it:
// `class Value : public BlockAllocated<Value>`.
template <class T, std::size_t kMaxBlocks = 4096>
struct BlockAllocated {
  static void* operator new(std::size_t size) { return BlockCache<T, kMaxBlocks>::allocate(size); }
  static void operator delete(void* p, std::size_t size) { BlockCache<T, kMaxBlocks>::deallocate(p, size); }
};

}  // namespace aotpipe
