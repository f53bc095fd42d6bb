#include <aotpipe/graph/interpreter.h>
#include <aotpipe/graph/run_arena.h>

#include <c10/core/DeviceGuard.h>
#include <c10/core/TensorImpl.h>
#include <c10/core/impl/VirtualGuardImpl.h>

#include <algorithm>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

namespace aotpipe {
namespace {

struct CachedArena {
  c10::Storage storage;
  c10::Stream stream;
};

// The arenas one thread's runs gave back, one per stream: a forward and its backward, and every
// step after them, reuse one allocation instead of asking the allocator (and, for large arenas,
// the kernel for fresh pages) at every run. Reachable from every thread, so that
// release_cached_arenas() also frees those of threads the caller does not run (autograd's device
// threads, a pool's); the mutex is uncontended but for such a release.
struct ThreadArenas {
  std::mutex mutex;
  std::vector<CachedArena> arenas;
};

// Every live thread's arenas. Never destroyed: a thread may exit after static destruction.
struct Registry {
  std::mutex mutex;
  std::vector<std::shared_ptr<ThreadArenas>> threads;
};
Registry& registry() {
  static auto* r = new Registry;  // NOLINT(cppcoreguidelines-owning-memory): deliberately leaked
  return *r;
}

// The calling thread's entry: registered at its first run, its arenas freed when it exits.
class ThisThread {
 public:
  ThisThread() : arenas_(std::make_shared<ThreadArenas>()) {
    const std::lock_guard lock(registry().mutex);
    registry().threads.push_back(arenas_);
  }
  ~ThisThread() {
    const std::lock_guard lock(registry().mutex);
    std::erase(registry().threads, arenas_);
  }
  ThisThread(const ThisThread&) = delete;
  ThisThread& operator=(const ThisThread&) = delete;
  ThreadArenas& arenas() { return *arenas_; }

 private:
  std::shared_ptr<ThreadArenas> arenas_;
};
ThreadArenas& this_threads_arenas() {
  thread_local ThisThread mine;
  return mine.arenas();
}

c10::Stream current_stream(c10::Device device) { return c10::impl::VirtualGuardImpl(device.type()).getStream(device); }

c10::Storage new_arena(std::size_t bytes, c10::Device device) {
  const c10::OptionalDeviceGuard guard(device);
  return {c10::Storage::use_byte_size_t(), c10::SymInt(static_cast<int64_t>(bytes)), c10::GetAllocator(device.type()),
          /*resizable=*/false};
}

}  // namespace

ArenaLease::ArenaLease(std::size_t bytes, c10::Device device) : stream_(current_stream(device)) {
  {
    ThreadArenas& mine = this_threads_arenas();
    const std::lock_guard lock(mine.mutex);
    auto cached =
        std::find_if(mine.arenas.begin(), mine.arenas.end(), [&](const CachedArena& a) { return a.stream == stream_; });
    if (cached != mine.arenas.end()) {
      if (cached->storage.nbytes() >= bytes) storage_ = std::move(cached->storage);
      mine.arenas.erase(cached);  // one too small is freed before the new one is made
    }
  }
  if (!storage_) storage_ = new_arena(bytes, device);
}

ArenaLease::~ArenaLease() {
  if (!storage_ || storage_.use_count() != 1) return;
  ThreadArenas& mine = this_threads_arenas();
  const std::lock_guard lock(mine.mutex);
  mine.arenas.push_back({std::move(storage_), stream_});
}

at::Tensor arena_tensor(const c10::Storage& arena, const TensorMeta& meta, int64_t element_offset) {
  const c10::DispatchKeySet keys(c10::computeDispatchKey(meta.dtype, c10::kStrided, arena.device()));
  at::Tensor t =
      at::detail::make_tensor<c10::TensorImpl>(c10::Storage(arena), keys, c10::scalarTypeToTypeMeta(meta.dtype));
  t.unsafeGetTensorImpl()->set_sizes_and_strides(meta.sizes, meta.strides, element_offset);
  return t;
}

// Each thread's arenas leave its list under its mutex and are freed after: a GPU arena goes back
// to the caching allocator, which keeps it for the stream it was made on, so kernels still queued
// there finish before anything else is put in it.
void release_cached_arenas() {
  std::vector<std::shared_ptr<ThreadArenas>> threads;
  {
    const std::lock_guard lock(registry().mutex);
    threads = registry().threads;
  }
  for (const auto& thread : threads) {
    std::vector<CachedArena> freed;  // freed at the end of this iteration, outside the lock
    const std::lock_guard lock(thread->mutex);
    freed.swap(thread->arenas);
  }
}

std::size_t cached_arena_bytes() {
  const std::lock_guard lock(registry().mutex);
  std::size_t bytes = 0;
  for (const auto& thread : registry().threads) {
    const std::lock_guard thread_lock(thread->mutex);
    for (const CachedArena& arena : thread->arenas) bytes += arena.storage.nbytes();
  }
  return bytes;
}

}  // namespace aotpipe
