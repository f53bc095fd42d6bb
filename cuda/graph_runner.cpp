#include <aotpipe/cuda/internal/graph_runner.h>

#include <ATen/ATen.h>
#include <ATen/MemoryOverlap.h>
#include <ATen/SavedTensorHooks.h>
#include <ATen/cuda/CUDAEvent.h>
#include <ATen/cuda/CUDAGraph.h>
#include <c10/core/GradMode.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <c10/util/Exception.h>
#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <map>
#include <stdexcept>

namespace aotpipe {

namespace {
std::atomic<std::uint64_t> capture_count{0};
std::atomic<std::uint64_t> replay_count{0};
std::atomic<std::uint64_t> fallback_count{0};
std::atomic<std::uint64_t> pool_count{0};
std::atomic<std::uint64_t> lent_count{0};
std::atomic<std::uint64_t> lent_copied_count{0};
std::atomic<std::uint64_t> lent_read_count{0};
}  // namespace

CudaGraphCounters cuda_graph_counters() {
  return {capture_count.load(), replay_count.load(),    fallback_count.load(),   pool_count.load(),
          lent_count.load(),    lent_read_count.load(), lent_copied_count.load()};
}

namespace cuda_detail {

SharedCapture::SharedCapture()
    : id([] {
        static std::atomic<std::uint64_t> next{1};
        return next++;
      }()) {}

namespace {

// One capture at a time in the process: two captures on one side stream (the pool hands the
// same streams out again) would corrupt each other, and captures are rare.
std::mutex capture_mutex;

struct CaptureRefused : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// A tensor over `storage` (on its device) with `like`'s dtype, sizes and strides, starting
// `offset_bytes` in.
at::Tensor view_of_storage(const c10::Storage& storage, int64_t offset_bytes, const at::Tensor& like) {
  const c10::DispatchKeySet keys(c10::computeDispatchKey(like.scalar_type(), like.layout(), storage.device()));
  at::Tensor view = at::detail::make_tensor<c10::TensorImpl>(c10::Storage(storage), keys, like.dtype());
  view.unsafeGetTensorImpl()->set_sizes_and_strides(like.sizes(), like.strides(),
                                                    offset_bytes / static_cast<int64_t>(like.element_size()));
  return view;
}

int64_t start_byte(const at::Tensor& t) { return t.storage_offset() * static_cast<int64_t>(t.element_size()); }

// One past the last byte `t` reads (t has elements).
int64_t end_byte(const at::Tensor& t) {
  int64_t last = t.storage_offset();
  for (int64_t d = 0; d < t.dim(); ++d) last += (t.size(d) - 1) * t.stride(d);
  return (last + 1) * static_cast<int64_t>(t.element_size());
}

bool same_layout(const at::Tensor& a, const at::Tensor& b) {
  return a.scalar_type() == b.scalar_type() && a.device() == b.device() && a.sizes() == b.sizes() &&
         a.strides() == b.strides();
}

// Lent memory (CudaGraphOptions::lend_saved_outputs): a storage whose DataPtr points into a
// graph's static storage and holds a reference to it (the context), so the memory outlives the
// graph if a lent value does. The deleter marks it: a backward graph of the same group recognises
// a lent input by it and by the lender.
struct LentMemory {
  c10::Storage source;   // the lending graph's static storage
  std::uint64_t lender;  // the group of the lending graph (SharedCapture::id: never reused, as an address may be)
};
void release_lent_memory(void* lent) { delete static_cast<LentMemory*>(lent); }

c10::Storage lend(const c10::Storage& static_storage, int64_t first_byte, int64_t bytes, const SharedCapture& lender) {
  auto* lent = new LentMemory{static_storage, lender.id};
  c10::DataPtr data(static_cast<char*>(lent->source.mutable_data()) + first_byte, lent, &release_lent_memory,
                    static_storage.device());
  return c10::Storage(c10::make_intrusive<c10::StorageImpl>(c10::StorageImpl::use_byte_size_t(), bytes, std::move(data),
                                                            nullptr, /*resizable=*/false));
}

// Where `storage`, if `lender` lent it, points: the static storage and its first byte there.
std::optional<std::pair<c10::Storage, int64_t>> lent_source(const c10::Storage& storage, const SharedCapture& lender) {
  if (!storage.unsafeGetStorageImpl()) return std::nullopt;
  const c10::DataPtr& data = storage.data_ptr();
  if (data.get_deleter() != &release_lent_memory) return std::nullopt;
  const auto* lent = static_cast<const LentMemory*>(data.get_context());
  if (lent->lender != lender.id) return std::nullopt;
  return std::pair{lent->source, static_cast<const char*>(data.get()) - static_cast<const char*>(lent->source.data())};
}

// Gives a storage `lender` lent memory of its own, with the bytes it has (copied on the current
// stream, before a replay overwrites them): every tensor over it keeps its value. Nothing when it
// is not (or no longer) lent by `lender`. Returns whether it copied: a copy queued on the current
// stream reads the lender's static memory, which the group's next replay must wait for.
bool take_back(c10::StorageImpl& storage, const SharedCapture& lender) {
  const c10::Storage lent_storage(c10::intrusive_ptr<c10::StorageImpl>::reclaim_copy(&storage));
  if (!lent_source(lent_storage, lender)) return false;
  const auto bytes = static_cast<int64_t>(lent_storage.nbytes());
  const at::Tensor own = at::empty({bytes}, at::TensorOptions().dtype(at::kByte).device(lent_storage.device()));
  own.copy_(at::empty({0}, own.options()).set_(lent_storage, 0, {bytes}, {1}));
  storage.set_data_ptr_noswap(own.storage().unsafeGetStorageImpl()->set_data_ptr(c10::DataPtr(nullptr, own.device())));
  ++lent_copied_count;
  return true;
}

// Ends a capture the interpreter left midway (an op threw), and frees what it allocated.
void abandon_capture(const c10::cuda::CUDAStream& stream, c10::DeviceIndex device, at::cuda::MempoolId_t pool) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  if (cudaStreamIsCapturing(stream.stream(), &status) == cudaSuccess && status != cudaStreamCaptureStatusNone) {
    cudaGraph_t partial = nullptr;
    (void)cudaStreamEndCapture(stream.stream(), &partial);
    if (partial) (void)cudaGraphDestroy(partial);
  }
  (void)cudaGetLastError();
  c10::cuda::CUDACachingAllocator::endAllocateToPool(device, pool);
  c10::cuda::CUDACachingAllocator::releasePool(device, pool);
}

}  // namespace

// The captured graph and its static memory: the inputs it reads, the outputs it writes, and how
// each call's arguments go in and results come out.
class CapturedGraph {
 public:
  // lent: a value another graph of the group lent (a saved value, read where the forward left it).
  enum class InputKind : std::uint8_t { undefined, in_place, copied, cpu_scalar, lent };
  struct Input {
    InputKind kind;
    // in_place: the caller's tensor, held (its address is in the graph); lent: the same bytes in
    // the lending graph's static storage (not the lent storage, whose liveness is watched); else
    // the static buffer.
    at::Tensor tensor;
  };
  // alias_of_copied_input: of a copied input or a CPU scalar (the caller's tensor is handed out).
  // unread_host: RNG state no kernel reads, left on the host by the capture (unread_host_outputs).
  enum class OutputKind : std::uint8_t {
    undefined,
    empty,
    alias_of_in_place_input,
    alias_of_copied_input,
    pooled,
    unread_host
  };
  struct Output {
    OutputKind kind;
    at::Tensor captured;       // the static output: dtype, sizes, strides to hand out
    std::size_t index = 0;     // alias_of_copied_input: the input; pooled: the group
    int64_t offset_bytes = 0;  // from the input's first byte, or from the group's first byte
  };
  // Outputs sharing one static storage are copied out as one byte range, so their aliasing holds.
  struct Group {
    at::Tensor bytes;          // the range, as a uint8 view of the static storage
    std::size_t uses_at_rest;  // the storage's use count when no handed-out output is alive
    bool lent = false;         // every output in it is a saved value: lent, not copied out
  };

  static std::unique_ptr<CapturedGraph> capture(const Interpreter& interpreter, const TensorList& args,
                                                const CudaGraphOptions& options, const std::vector<bool>& unread_host,
                                                std::optional<std::size_t> lent_from, SharedCapture& shared);

  ~CapturedGraph() {
    // A replay may still be running on some stream: its memory goes back to the allocator here.
    shared_->done.synchronize();
  }

  std::optional<std::string> mismatch(const TensorList& args) const;
  bool outputs_alive() const;
  TensorList replay(const TensorList& args, CudaGraphOptions::Outputs mode);

 private:
  explicit CapturedGraph(SharedCapture& shared) : shared_(&shared) {}
  void copy_in(const TensorList& args);
  void plan_outputs(TensorList static_outputs, const std::vector<bool>& unread_host,
                    std::optional<std::size_t> lent_from);
  TensorList hand_out(const TensorList& args, CudaGraphOptions::Outputs mode);
  void take_back_lent();
  bool may_lend() const;

  c10::Device device_{c10::kCUDA, 0};
  std::vector<Input> inputs_;
  std::vector<std::size_t> copied_;       // the copied inputs' indices
  std::vector<at::Tensor> copy_targets_;  // their static buffers, in that order
  std::vector<Output> outputs_;
  std::vector<Group> groups_;
  // The storages the last replay lent: one still alive at the next replay gets memory of its own.
  std::vector<c10::weak_intrusive_ptr<c10::StorageImpl>> lent_;
  std::size_t lent_inputs_ = 0;  // inputs read in place where the group's forward lent them
  std::unique_ptr<at::cuda::CUDAGraph> graph_;
  // The group (its runner holds it, and this graph): every graph of it replays after its `done`.
  SharedCapture* shared_;
};

std::unique_ptr<CapturedGraph> CapturedGraph::capture(const Interpreter& interpreter, const TensorList& args,
                                                      const CudaGraphOptions& options,
                                                      const std::vector<bool>& unread_host,
                                                      std::optional<std::size_t> lent_from, SharedCapture& shared) {
  std::unique_ptr<CapturedGraph> self(new CapturedGraph(shared));
  std::optional<c10::Device> device;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const at::Tensor& a = args[i];
    if (!a.defined() || (a.is_cpu() && a.dim() == 0)) continue;
    if (!a.is_cuda())
      throw CaptureRefused(
          fmt::format("input {} is on {}; a CUDA graph reads device memory only", i, a.device().str()));
    if (device && *device != a.device())
      throw CaptureRefused(
          fmt::format("inputs on {} and {}; a CUDA graph runs on one device", device->str(), a.device().str()));
    device = a.device();
  }
  self->device_ = device ? *device : c10::Device(c10::kCUDA, c10::cuda::current_device());
  const c10::cuda::CUDAGuard on_device(self->device_);

  TensorList static_args;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const at::Tensor& a = args[i];
    Input input{InputKind::undefined, {}};
    if (!a.defined()) {
    } else if (a.is_cpu()) {
      input = {InputKind::cpu_scalar, at::empty(std::vector<int64_t>{}, a.options().device(self->device_))};
    } else if (auto source = lent_source(a.storage(), shared)) {
      input = {InputKind::lent, view_of_storage(source->first, source->second + start_byte(a), a)};
      ++self->lent_inputs_;
    } else if ((options.static_parameters && a.requires_grad() && a.is_leaf()) ||
               at::has_internal_overlap(a) == at::MemOverlap::Yes) {  // an expanded tensor cannot be copied into
      input = {InputKind::in_place, a};
    } else {
      input = {InputKind::copied, at::empty_strided(a.sizes(), a.strides(), a.options())};
      self->copied_.push_back(i);
      self->copy_targets_.push_back(input.tensor);
    }
    static_args.push_back(input.tensor);
    self->inputs_.push_back(std::move(input));
  }

  const std::lock_guard<std::mutex> one_capture(capture_mutex);
  const c10::cuda::CUDAStream caller = c10::cuda::getCurrentCUDAStream(self->device_.index());
  const c10::cuda::CUDAStream side = c10::cuda::getStreamFromPool(false, self->device_.index());
  at::cuda::CUDAEvent caller_ready;
  caller_ready.record(caller);
  caller_ready.block(side);
  TensorList static_outputs;
  {
    const c10::cuda::CUDAStreamGuard on_side(side);
    const at::NoGradGuard values_only;
    self->copy_in(args);
    // Warm-up: lazy initialisation (cuBLAS handles and workspaces, cuDNN plans) happens outside
    // the capture, on the stream the capture uses.
    (void)interpreter.run(static_args);
    self->graph_ = std::make_unique<at::cuda::CUDAGraph>();
    if (!shared.pool) {
      shared.pool = at::cuda::graph_pool_handle();
      ++pool_count;
    }
    const at::cuda::MempoolId_t pool = *shared.pool;
    // Thread-local mode: other threads' CUDA calls (allocations, syncs) do not break this capture.
    self->graph_->capture_begin(pool, cudaStreamCaptureModeThreadLocal);
    try {
      static_outputs = interpreter.run(static_args);
    } catch (const std::exception& e) {
      abandon_capture(side, self->device_.index(), pool);
      self->graph_.reset();
      throw CaptureRefused(fmt::format("its capture failed: {}", e.what()));
    }
    try {
      self->graph_->capture_end();
    } catch (const std::exception& e) { throw CaptureRefused(fmt::format("its capture failed: {}", e.what())); }
  }
  at::cuda::CUDAEvent captured;
  captured.record(side);
  captured.block(caller);
  self->plan_outputs(std::move(static_outputs), unread_host, lent_from);
  return self;
}

void CapturedGraph::plan_outputs(TensorList static_outputs, const std::vector<bool>& unread_host,
                                 std::optional<std::size_t> lent_from) {
  std::map<const c10::StorageImpl*, std::size_t> group_of;
  std::vector<std::pair<int64_t, int64_t>> ranges;  // per group: [first byte, end byte)
  std::vector<c10::Storage> storages;
  std::vector<bool> all_saved;  // per group: every output in it is a saved value
  for (std::size_t k = 0; k < static_outputs.size(); ++k) {
    at::Tensor& o = static_outputs[k];
    Output out{OutputKind::undefined, o};
    if (!o.defined()) {
    } else if (o.numel() == 0) {
      out.kind = OutputKind::empty;
    } else {
      const c10::StorageImpl* storage = o.storage().unsafeGetStorageImpl();
      // An output in memory the forward lent (a view of a saved value) is copied out like a pooled
      // one: as a view of the lent storage, the next forward would have to take all of it back.
      auto input = std::find_if(inputs_.begin(), inputs_.end(), [&](const Input& in) {
        return in.kind != InputKind::lent && in.tensor.defined() &&
               in.tensor.storage().unsafeGetStorageImpl() == storage;
      });
      if (input != inputs_.end() && input->kind == InputKind::in_place) {
        out.kind = OutputKind::alias_of_in_place_input;
      } else if (input != inputs_.end()) {
        out.kind = OutputKind::alias_of_copied_input;
        out.index = static_cast<std::size_t>(input - inputs_.begin());
        out.offset_bytes = start_byte(o) - start_byte(input->tensor);
      } else if (o.device() != device_) {
        if (k >= unread_host.size() || !unread_host[k])
          throw CaptureRefused(
              fmt::format("output {} is on {}: its kernel ran on the host, once, at capture", k, o.device().str()));
        out.kind = OutputKind::unread_host;
      } else {
        auto [it, added] = group_of.emplace(storage, ranges.size());
        if (added) {
          ranges.emplace_back(start_byte(o), end_byte(o));
          storages.push_back(o.storage());
          all_saved.push_back(true);
        }
        if (!lent_from || k < *lent_from) all_saved[it->second] = false;
        auto& [first, end] = ranges[it->second];
        first = std::min(first, start_byte(o));
        end = std::max(end, end_byte(o));
        out.kind = OutputKind::pooled;
        out.index = it->second;
      }
    }
    outputs_.push_back(std::move(out));
  }
  for (std::size_t g = 0; g < ranges.size(); ++g) {
    const int64_t first = ranges[g].first / 16 * 16;  // a copy keeps each output's alignment mod 16
    const int64_t size = ranges[g].second - first;
    groups_.push_back(
        {at::empty({0}, at::TensorOptions().dtype(at::kByte).device(device_)).set_(storages[g], first, {size}, {1}), 0,
         all_saved[g]});
    ranges[g].first = first;
  }
  for (Output& out : outputs_)
    if (out.kind == OutputKind::pooled) out.offset_bytes = start_byte(out.captured) - ranges[out.index].first;
  // At rest, only this object holds the static storages: the capture's own references go first.
  static_outputs.clear();
  storages.clear();
  for (Group& group : groups_) group.uses_at_rest = group.bytes.storage().use_count();
}

std::optional<std::string> CapturedGraph::mismatch(const TensorList& args) const {
  if (args.size() != inputs_.size())
    return fmt::format("it was captured with {} inputs and is called with {}", inputs_.size(), args.size());
  for (std::size_t i = 0; i < args.size(); ++i) {
    const at::Tensor& a = args[i];
    const Input& in = inputs_[i];
    if (in.kind == InputKind::undefined) {
      if (a.defined()) return fmt::format("input {} was undefined when captured and is a tensor now", i);
      continue;
    }
    if (!a.defined()) return fmt::format("input {} is undefined and was a tensor when captured", i);
    switch (in.kind) {
      case InputKind::in_place:
        if (a.data_ptr() != in.tensor.data_ptr())
          return fmt::format(
              "input {} is read in place (a parameter: a leaf that requires grad) and its address changed since the "
              "capture",
              i);
        if (!same_layout(a, in.tensor)) return fmt::format("input {} changed dtype, sizes or strides", i);
        break;
      case InputKind::copied:
        if (!same_layout(a, in.tensor)) return fmt::format("input {} changed device, dtype, sizes or strides", i);
        break;
      case InputKind::cpu_scalar:
        if (!a.is_cpu() || a.dim() != 0 || a.scalar_type() != in.tensor.scalar_type())
          return fmt::format("input {} is no longer a 0-dim CPU {} tensor", i, c10::toString(in.tensor.scalar_type()));
        break;
      case InputKind::lent:
        if (a.data_ptr() != in.tensor.data_ptr() || !same_layout(a, in.tensor))
          return fmt::format(
              "input {} (a value the forward saved) is not where the forward's replay left it (another forward "
              "replayed before this backward, or the forward ran in the interpreter)",
              i);
        break;
      case InputKind::undefined: break;
    }
  }
  return std::nullopt;
}

bool CapturedGraph::outputs_alive() const {
  return std::any_of(groups_.begin(), groups_.end(),
                     [](const Group& g) { return g.bytes.storage().use_count() > g.uses_at_rest; });
}

void CapturedGraph::copy_in(const TensorList& args) {
  if (!copied_.empty()) {
    std::vector<at::Tensor> sources;
    sources.reserve(copied_.size());
    for (std::size_t i : copied_) sources.push_back(args[i]);
    at::_foreach_copy_(copy_targets_, sources);
  }
  for (std::size_t i = 0; i < inputs_.size(); ++i)
    if (inputs_[i].kind == InputKind::cpu_scalar) inputs_[i].tensor.fill_(args[i].item());
}

void CapturedGraph::take_back_lent() {
  // Alive past its backward's turn (a second forward before the first's backward, a retained
  // graph): it gets memory of its own, with the value it has, before the replay overwrites it.
  for (const c10::weak_intrusive_ptr<c10::StorageImpl>& weak : lent_)
    if (c10::intrusive_ptr<c10::StorageImpl> still_lent = weak.lock()) take_back(*still_lent, *shared_);
  lent_.clear();
}

// Only to a backward a GraphRunner of the group runs, and not where saved-tensor hooks (PyTorch's
// activation offloading) would see the saved values.
bool CapturedGraph::may_lend() const {
  return shared_->backward_is_runner.load() && at::SavedTensorDefaultHooks::get_tls_state().stack.empty();
}

TensorList CapturedGraph::hand_out(const TensorList& args, CudaGraphOptions::Outputs mode) {
  // Per group: where its outputs are handed out from (fresh memory, a lent storage, or nothing:
  // the static memory itself).
  std::vector<c10::Storage> group_memory(groups_.size());
  if (mode == CudaGraphOptions::Outputs::fresh && !groups_.empty()) {
    std::vector<at::Tensor> copies, sources;
    const bool lending = may_lend();
    for (std::size_t g = 0; g < groups_.size(); ++g) {
      const at::Tensor& range = groups_[g].bytes;
      if (groups_[g].lent && lending) {
        group_memory[g] = lend(range.storage(), start_byte(range), range.numel(), *shared_);
        lent_.emplace_back(group_memory[g].getWeakStorageImpl());
        ++lent_count;
        continue;
      }
      copies.push_back(at::empty({range.numel()}, range.options()));
      group_memory[g] = copies.back().storage();
      sources.push_back(range);
    }
    if (!copies.empty()) at::_foreach_copy_(copies, sources);
  }
  TensorList out;
  out.reserve(outputs_.size());
  for (const Output& o : outputs_) {
    switch (o.kind) {
      case OutputKind::undefined: out.emplace_back(); break;
      case OutputKind::empty:
        out.push_back(at::empty_strided(o.captured.sizes(), o.captured.strides(), o.captured.options()));
        break;
      case OutputKind::unread_host: out.push_back(o.captured); break;
      case OutputKind::alias_of_in_place_input:
        out.push_back(view_of_storage(o.captured.storage(), start_byte(o.captured), o.captured));
        break;
      case OutputKind::alias_of_copied_input: {
        at::Tensor alias =
            view_of_storage(args[o.index].storage(), start_byte(args[o.index]) + o.offset_bytes, o.captured);
        // Never a view of lent memory (a backward captured before its forward lent, then given a
        // lent value): the forward's next replay would take all of it back. The copy keeps the
        // values, not an overlapping or strided layout (gradients: autograd checks sizes only).
        out.push_back(lent_source(args[o.index].storage(), *shared_) ? alias.clone(at::MemoryFormat::Preserve)
                                                                     : std::move(alias));
        break;
      }
      case OutputKind::pooled:
        if (mode == CudaGraphOptions::Outputs::fresh)
          out.push_back(view_of_storage(group_memory[o.index], o.offset_bytes, o.captured));
        else
          out.push_back(view_of_storage(o.captured.storage(), start_byte(o.captured), o.captured));
        break;
    }
  }
  return out;
}

TensorList CapturedGraph::replay(const TensorList& args, CudaGraphOptions::Outputs mode) {
  const c10::cuda::CUDAGuard on_device(device_);
  const c10::cuda::CUDAStream stream = c10::cuda::getCurrentCUDAStream(device_.index());
  const at::NoGradGuard values_only;
  shared_->done.block(stream);  // the group's previous replay, on whatever stream, has copied its outputs out
  take_back_lent();
  copy_in(args);
  graph_->replay();
  lent_read_count += lent_inputs_;
  TensorList out = hand_out(args, mode);
  shared_->done.record(stream);
  return out;
}

GraphRunner::GraphRunner(std::shared_ptr<const Interpreter> interpreter, std::string name, CudaGraphOptions options,
                         std::vector<bool> unread_host_outputs, std::optional<std::size_t> lent_from,
                         std::shared_ptr<SharedCapture> shared, bool reads_lent_values)
    : interpreter_(std::move(interpreter)),
      name_(std::move(name)),
      options_(options),
      unread_host_outputs_(std::move(unread_host_outputs)),
      lent_from_(lent_from),
      reads_lent_values_(reads_lent_values),
      shared_(shared ? std::move(shared) : std::make_shared<SharedCapture>()) {}

GraphRunner::~GraphRunner() = default;

void GraphRunner::prepare_interpreted_call(const TensorList& args) {
  for (const at::Tensor& a : args) {
    if (!a.defined() || !a.is_cuda() || !a.has_storage()) continue;
    const c10::cuda::CUDAStream stream = c10::cuda::getCurrentCUDAStream(a.device().index());
    // After the group's last replay: it may have written what this call reads (a value taken back).
    shared_->done.block(stream);
    // A value the group's forward lent: the interpreter reads it outside the group's order, so it
    // gets memory of its own first, which no replay writes. The copy reads the forward's static
    // memory on this stream: the group's next replay, on any stream, waits for it (the stream has
    // waited for `done`, so recording it here orders everything before too).
    if (take_back(*a.storage().unsafeGetStorageImpl(), *shared_)) shared_->done.record(stream);
    // Memory of the caching allocator goes back to it only once this stream is done with it.
    c10::cuda::CUDACachingAllocator::recordStream(a.storage().data_ptr(), stream);
  }
}

void GraphRunner::warn_once(const std::string& reason) {
  if (warned_.insert(reason).second) {
    TORCH_WARN("aotpipe cuda_graphs: graph '", name_, "' runs in the interpreter: ", reason);
  }
}

TensorList GraphRunner::operator()(TensorList args) {
  std::unique_lock<std::mutex> lock(shared_->mutex);
  if (!captured_ && !capture_refused_) {
    try {
      captured_ = CapturedGraph::capture(*interpreter_, args, options_, unread_host_outputs_, lent_from_, *shared_);
      ++capture_count;
    } catch (const CaptureRefused& e) {
      capture_refused_ = e.what();
      // A backward that will never replay reads its inputs in the interpreter, which would take
      // back every lent value at every call: the forward copies them out instead.
      if (reads_lent_values_) shared_->backward_is_runner = false;
    }
  }
  std::optional<std::string> why = capture_refused_;
  if (captured_) {
    why = captured_->mismatch(args);
    if (!why && options_.outputs == CudaGraphOptions::Outputs::static_alias && captured_->outputs_alive())
      why =
          "outputs of its previous replay are still alive (held by the caller, or saved for a pending backward) "
          "and it hands out static outputs (Outputs::static_alias)";
    if (!why) {
      ++replay_count;
      TensorList out = captured_->replay(args, options_.outputs);
      // The arguments (lent values among them) go while the group's mutex is held: a forward
      // waiting for it must not find them alive and take them back for nothing.
      args.clear();
      return out;
    }
  }
  warn_once(*why);
  prepare_interpreted_call(args);
  lock.unlock();
  ++fallback_count;
  return interpreter_->run(std::move(args));
}

}  // namespace cuda_detail
}  // namespace aotpipe
