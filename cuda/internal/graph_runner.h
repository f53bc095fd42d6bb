#pragma once
// One compiled graph under the cuda_graphs backend (cuda/cuda_graphs.h): captured at its first
// call, replayed after; the calls it cannot replay run in the interpreter, with a warning naming
// the reason once per graph and reason.
#include <aotpipe/cuda/cuda_graphs.h>
#include <aotpipe/graph/interpreter.h>

#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace aotpipe::cuda_detail {

class CapturedGraph;  // cuda/graph_runner.cpp

class GraphRunner {
 public:
  // unread_host_outputs: per output, whether the capture may leave it on the host
  // (capture_safety.h's unread_host_outputs).
  GraphRunner(std::shared_ptr<const Interpreter> interpreter, std::string name, CudaGraphOptions options,
              std::vector<bool> unread_host_outputs);
  ~GraphRunner();
  GraphRunner(const GraphRunner&) = delete;
  GraphRunner& operator=(const GraphRunner&) = delete;

  TensorList operator()(TensorList args);

 private:
  void warn_once(const std::string& reason);

  std::shared_ptr<const Interpreter> interpreter_;
  std::string name_;
  CudaGraphOptions options_;
  std::vector<bool> unread_host_outputs_;
  std::mutex mutex_;  // guards everything below; held through a capture or a replay's launches
  std::unique_ptr<CapturedGraph> captured_;
  std::optional<std::string> capture_refused_;  // why the capture failed: every call interprets
  std::set<std::string> warned_;
};

}  // namespace aotpipe::cuda_detail
