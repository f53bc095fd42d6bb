#pragma once
// ChromeTraceRecorder: every stage of every job as a Chrome trace (the Trace Event Format),
// which chrome://tracing and https://ui.perfetto.dev open.
//
// Each stage run is one complete event ("ph": "X") on the thread it started on, with ts/dur in
// microseconds since the recorder was created, and the job name (and the finishing thread,
// when the stage suspended and resumed elsewhere) in "args". Threads are named with metadata
// events ("thread_name"): "pool worker <i>" for scheduler threads, "thread <n>" otherwise.
#include <aotpipe/pipeline/instrumentation.h>

#include <nlohmann/json_fwd.hpp>

#include <filesystem>
#include <iosfwd>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace aotpipe {

class ChromeTraceRecorder final : public StageInstrumentation {
 public:
  ChromeTraceRecorder();

  void before_stage(const StageEvent& event) override;
  void after_stage(const StageEvent& event) override;
  void stage_failed(const StageEvent& event, const std::exception_ptr& error) override;

  // {"traceEvents": [...], "displayTimeUnit": "ms"}
  nlohmann::json to_json() const;
  void write(std::ostream& out) const;
  void save(const std::filesystem::path& path) const;

 private:
  struct ThreadLane {
    int tid;
    std::string name;
  };
  struct CompletedStage {
    std::string job;
    std::string stage;
    std::thread::id start_thread;
    std::thread::id end_thread;
    double start_us;
    double duration_us;
    bool failed;
  };

  void record(const StageEvent& event, bool failed);
  // Both with mutex_ held.
  void add_current_thread_lane();
  int lane_of(std::thread::id thread) const;

  const StageEvent::Clock::time_point origin_;
  mutable std::mutex mutex_;
  std::map<std::thread::id, ThreadLane> lanes_;
  std::vector<CompletedStage> stages_;
};

}  // namespace aotpipe
