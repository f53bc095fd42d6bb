#pragma once
// The arena a run of a planned graph writes its planned results into (InterpreterOptions::
// plan_memory, graph/memory_plan.h), and the tensors placed in it.
#include <aotpipe/graph/tensor_meta.h>

#include <ATen/core/Tensor.h>
#include <c10/core/Storage.h>

#include <cstddef>
#include <cstdint>

namespace aotpipe {

// A run's use of an arena of at least `bytes` on the current stream of `device`: the one the
// thread's last run on that stream gave back when it is big enough, else a new one. Given back at
// the end of the run only if no tensor of the run still holds it (the storage's reference count is
// the lease's alone), so a tensor that escaped the run never sees its memory reused; on a GPU only
// to the stream its kernels were queued on, so the next run on another stream cannot overwrite it
// while they are still running. Not resizable: a kernel resizing a planned result past the arena
// fails instead of moving every other planned tensor's memory.
class ArenaLease {
 public:
  ArenaLease(std::size_t bytes, c10::Device device);
  ~ArenaLease();
  ArenaLease(const ArenaLease&) = delete;
  ArenaLease& operator=(const ArenaLease&) = delete;

  const c10::Storage& storage() const { return storage_; }

 private:
  c10::Storage storage_;
  c10::Stream stream_;
};

// A tensor of `meta`'s dtype, sizes and strides in `arena`, starting `element_offset` elements in.
at::Tensor arena_tensor(const c10::Storage& arena, const TensorMeta& meta, int64_t element_offset);

}  // namespace aotpipe
