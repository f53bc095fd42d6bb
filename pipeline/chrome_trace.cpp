#include <aotpipe/pipeline/chrome_trace.h>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <oneapi/tbb/task_arena.h>

#include <fstream>
#include <ostream>
#include <stdexcept>
#include <unistd.h>

namespace aotpipe {
namespace {

using Microseconds = std::chrono::duration<double, std::micro>;

// Computed on the thread itself: oneTBB only tells a thread its own slot in its arena.
std::string current_thread_name(std::size_t lane_count) {
  const int slot = tbb::this_task_arena::current_thread_index();
  if (slot != tbb::task_arena::not_initialized) return fmt::format("pool worker {}", slot);
  return fmt::format("thread {}", lane_count + 1);
}

}  // namespace

ChromeTraceRecorder::ChromeTraceRecorder() : origin_(StageEvent::Clock::now()) {}

void ChromeTraceRecorder::add_current_thread_lane() {
  const std::thread::id thread = std::this_thread::get_id();
  if (!lanes_.contains(thread)) {
    const int tid = static_cast<int>(lanes_.size()) + 1;
    lanes_.emplace(thread, ThreadLane{tid, current_thread_name(lanes_.size())});
  }
}

void ChromeTraceRecorder::before_stage(const StageEvent&) {
  std::lock_guard lock(mutex_);
  add_current_thread_lane();  // the start thread
}

void ChromeTraceRecorder::after_stage(const StageEvent& event) { record(event, false); }

void ChromeTraceRecorder::stage_failed(const StageEvent& event, const std::exception_ptr&) { record(event, true); }

void ChromeTraceRecorder::record(const StageEvent& event, bool failed) {
  CompletedStage stage{.job = std::string(event.job),
                       .stage = std::string(event.stage),
                       .start_thread = event.start_thread,
                       .end_thread = event.end_thread,
                       .start_us = Microseconds(event.start - origin_).count(),
                       .duration_us = Microseconds(event.elapsed()).count(),
                       .failed = failed};
  std::lock_guard lock(mutex_);
  add_current_thread_lane();  // the end thread
  stages_.push_back(std::move(stage));
}

int ChromeTraceRecorder::lane_of(std::thread::id thread) const {
  const auto lane = lanes_.find(thread);
  return lane == lanes_.end() ? 0 : lane->second.tid;
}

nlohmann::json ChromeTraceRecorder::to_json() const {
  const int pid = static_cast<int>(::getpid());
  auto events = nlohmann::json::array();
  std::lock_guard lock(mutex_);
  for (const auto& [thread, lane] : lanes_) {
    events.push_back(
        {{"name", "thread_name"}, {"ph", "M"}, {"pid", pid}, {"tid", lane.tid}, {"args", {{"name", lane.name}}}});
  }
  for (const CompletedStage& stage : stages_) {
    nlohmann::json args = {{"job", stage.job}, {"status", stage.failed ? "failed" : "ok"}};
    if (stage.end_thread != stage.start_thread) args["finished_on_tid"] = lane_of(stage.end_thread);
    events.push_back({{"name", stage.stage},
                      {"cat", "stage"},
                      {"ph", "X"},
                      {"pid", pid},
                      {"tid", lane_of(stage.start_thread)},
                      {"ts", stage.start_us},
                      {"dur", stage.duration_us},
                      {"args", std::move(args)}});
  }
  return {{"traceEvents", std::move(events)}, {"displayTimeUnit", "ms"}};
}

void ChromeTraceRecorder::write(std::ostream& out) const { out << to_json().dump() << '\n'; }

void ChromeTraceRecorder::save(const std::filesystem::path& path) const {
  std::ofstream out(path);
  if (!out) throw std::runtime_error(fmt::format("cannot write the Chrome trace to '{}'", path.string()));
  write(out);
}

}  // namespace aotpipe
