#pragma once
// One compiled graph under the cuda_graphs backend (cuda/cuda_graphs.h): captured at its first
// call, replayed after; the calls it cannot replay run in the interpreter, with a warning naming
// the reason once per graph and reason.
#include <aotpipe/cuda/cuda_graphs.h>
#include <aotpipe/graph/interpreter.h>

#include <ATen/cuda/CUDAEvent.h>
#include <c10/core/Allocator.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace aotpipe::cuda_detail {

class CapturedGraph;  // cuda/graph_runner.cpp

// What the graphs of one compiled function share (the "aotpipe.cuda_graphs" entry of its
// CompileGroup, backend/backend_notes.h): one memory pool for their captures, as
// make_graphed_callables shares one between a forward and its backward (the backward's
// intermediates reuse the blocks the forward's intermediates freed), and therefore one replay at
// a time: a replay waits on the host (the mutex) and on the GPU (the event) for the previous
// replay of any of them.
struct SharedCapture {
  SharedCapture();
  const std::uint64_t id;                // unique in the process: what a lent storage names its lender by
  std::mutex mutex;                      // guards the runners' state; held through a capture or a replay's launches
  std::optional<c10::MempoolId_t> pool;  // made by the first capture
  at::cuda::CUDAEvent done;              // recorded after each replay's last copy out
  // A graph of the group that is not a forward (the backward) is run by a GraphRunner: the one
  // reader a forward may lend its saved values to (CudaGraphOptions::lend_saved_outputs), since
  // it reads them under this mutex, ordered by `done`. A backward compiled otherwise (refused at
  // compile time, another compiler) gets copies.
  std::atomic<bool> backward_is_runner{false};
};

class GraphRunner {
 public:
  // unread_host_outputs: per output, whether the capture may leave it on the host
  // (capture_safety.h's unread_host_outputs). lent_from: outputs from this index on go to the
  // backward graph only and are lent, not copied out (CudaGraphOptions::lend_saved_outputs).
  // reads_lent_values: this is the group's backward, the reader its forward lends to
  // (SharedCapture::backward_is_runner); should its capture fail, the forward stops lending.
  GraphRunner(std::shared_ptr<const Interpreter> interpreter, std::string name, CudaGraphOptions options,
              std::vector<bool> unread_host_outputs, std::optional<std::size_t> lent_from,
              std::shared_ptr<SharedCapture> shared, bool reads_lent_values = false);
  ~GraphRunner();
  GraphRunner(const GraphRunner&) = delete;
  GraphRunner& operator=(const GraphRunner&) = delete;

  TensorList operator()(TensorList args);

 private:
  void warn_once(const std::string& reason);
  // Before a call the interpreter runs, with the group's mutex held: ordered after the group's
  // replays, on memory no replay writes (a lent argument is taken back), docs/cuda-graphs.md.
  void prepare_interpreted_call(const TensorList& args);

  std::shared_ptr<const Interpreter> interpreter_;
  std::string name_;
  CudaGraphOptions options_;
  std::vector<bool> unread_host_outputs_;
  std::optional<std::size_t> lent_from_;
  bool reads_lent_values_;
  std::shared_ptr<SharedCapture> shared_;  // its mutex guards everything below
  std::unique_ptr<CapturedGraph> captured_;
  std::optional<std::string> capture_refused_;  // why the capture failed: every call interprets
  std::set<std::string> warned_;
};

}  // namespace aotpipe::cuda_detail
