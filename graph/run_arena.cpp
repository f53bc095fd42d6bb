#include <aotpipe/graph/interpreter.h>
#include <aotpipe/graph/run_arena.h>

#include <c10/core/DeviceGuard.h>
#include <c10/core/TensorImpl.h>
#include <c10/core/impl/VirtualGuardImpl.h>

#include <algorithm>
#include <utility>
#include <vector>

namespace aotpipe {
namespace {

struct CachedArena {
  c10::Storage storage;
  c10::Stream stream;
};

// The arenas this thread's runs gave back, one per stream: a forward and its backward, and every
// step after them, reuse one allocation instead of asking the allocator (and, for large arenas,
// the kernel for fresh pages) at every run.
thread_local std::vector<CachedArena> cached_arenas;

c10::Stream current_stream(c10::Device device) { return c10::impl::VirtualGuardImpl(device.type()).getStream(device); }

c10::Storage new_arena(std::size_t bytes, c10::Device device) {
  const c10::OptionalDeviceGuard guard(device);
  return {c10::Storage::use_byte_size_t(), c10::SymInt(static_cast<int64_t>(bytes)), c10::GetAllocator(device.type()),
          /*resizable=*/false};
}

}  // namespace

ArenaLease::ArenaLease(std::size_t bytes, c10::Device device) : stream_(current_stream(device)) {
  auto cached = std::find_if(cached_arenas.begin(), cached_arenas.end(),
                             [&](const CachedArena& a) { return a.stream == stream_; });
  if (cached != cached_arenas.end()) {
    if (cached->storage.nbytes() >= bytes) storage_ = std::move(cached->storage);
    cached_arenas.erase(cached);  // one too small is freed before the new one is made
  }
  if (!storage_) storage_ = new_arena(bytes, device);
}

ArenaLease::~ArenaLease() {
  if (storage_ && storage_.use_count() == 1) cached_arenas.push_back({std::move(storage_), stream_});
}

at::Tensor arena_tensor(const c10::Storage& arena, const TensorMeta& meta, int64_t element_offset) {
  const c10::DispatchKeySet keys(c10::computeDispatchKey(meta.dtype, c10::kStrided, arena.device()));
  at::Tensor t =
      at::detail::make_tensor<c10::TensorImpl>(c10::Storage(arena), keys, c10::scalarTypeToTypeMeta(meta.dtype));
  t.unsafeGetTensorImpl()->set_sizes_and_strides(meta.sizes, meta.strides, element_offset);
  return t;
}

void release_cached_arenas() { cached_arenas.clear(); }

}  // namespace aotpipe
