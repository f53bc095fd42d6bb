#pragma once
// Batch progress on stderr: a bar redrawn in place on a terminal, one log line per finished
// job otherwise (CI logs, pipes). Fed from BatchOptions::progress, whose calls are serialized.
#include <aotpipe/pipeline/batch.h>

#include <chrono>

namespace aotpipe::cli {

class ProgressDisplay {
 public:
  // `interactive`: stderr is a terminal (draw a bar) or not (log lines).
  explicit ProgressDisplay(bool interactive);
  void update(const BatchProgress& progress);
  // Clears the bar so that the report starts on a clean line.
  void finish();

 private:
  bool interactive_;
  bool drawn_ = false;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
};

// Whether stderr is a terminal.
bool stderr_is_terminal();

}  // namespace aotpipe::cli
