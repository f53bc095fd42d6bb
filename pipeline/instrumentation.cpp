#include <aotpipe/pipeline/instrumentation.h>

#include <aotpipe/pipeline/errors.h>
#include <aotpipe/pipeline/job_env.h>

#include <fmt/chrono.h>
#include <fmt/format.h>

#include <algorithm>
#include <ranges>

namespace aotpipe {

StageHooks& StageHooks::add(std::shared_ptr<StageInstrumentation> instrumentation) {
  instrumentations_.push_back(std::move(instrumentation));
  return *this;
}

void StageHooks::before_stage(const StageEvent& event) const {
  for (const auto& instrumentation : instrumentations_) instrumentation->before_stage(event);
}

// Reverse iterators, not std::views::reverse: clang before 16 (clang-tidy 14 of scripts/check-tidy)
// rejects libstdc++'s ranges::ref_view (llvm/llvm-project#52696 and its duplicates).
void StageHooks::after_stage(const StageEvent& event) const {
  for (auto it = instrumentations_.rbegin(); it != instrumentations_.rend(); ++it) (*it)->after_stage(event);
}

void StageHooks::stage_failed(const StageEvent& event, const std::exception_ptr& error) const {
  for (auto it = instrumentations_.rbegin(); it != instrumentations_.rend(); ++it) (*it)->stage_failed(event, error);
}

void StageTimings::after_stage(const StageEvent& event) { record(event, false); }

void StageTimings::stage_failed(const StageEvent& event, const std::exception_ptr&) { record(event, true); }

void StageTimings::record(const StageEvent& event, bool failed) {
  const auto elapsed = std::chrono::duration_cast<std::chrono::nanoseconds>(event.elapsed());
  std::lock_guard lock(mutex_);
  auto entry = std::ranges::find(entries_, event.stage, &Entry::stage);
  if (entry == entries_.end()) {
    entries_.push_back(Entry{.stage = std::string(event.stage)});
    entry = std::prev(entries_.end());
  }
  ++entry->runs;
  entry->failures += failed ? 1 : 0;
  entry->total += elapsed;
  entry->min = std::min(entry->min, elapsed);
  entry->max = std::max(entry->max, elapsed);
}

std::vector<StageTimings::Entry> StageTimings::entries() const {
  std::vector<Entry> sorted;
  {
    std::lock_guard lock(mutex_);
    sorted = entries_;
  }
  std::ranges::stable_sort(sorted, std::ranges::greater{}, &Entry::total);
  return sorted;
}

std::string StageTimings::report() const {
  using Milliseconds = std::chrono::duration<double, std::milli>;
  std::string table = fmt::format("{:<24} {:>6} {:>8} {:>12} {:>12} {:>12}\n", "stage", "runs", "failures", "total ms",
                                  "mean ms", "max ms");
  for (const Entry& entry : entries()) {
    const Milliseconds total = entry.total;
    fmt::format_to(std::back_inserter(table), "{:<24} {:>6} {:>8} {:>12.3f} {:>12.3f} {:>12.3f}\n", entry.stage,
                   entry.runs, entry.failures, total.count(), total.count() / static_cast<double>(entry.runs),
                   Milliseconds(entry.max).count());
  }
  return table;
}

StageRunScope::StageRunScope(const JobEnv& env, std::string_view stage)
    : env_(env),
      event_{.job = env.job_name,
             .stage = stage,
             .start = StageEvent::Clock::now(),
             .start_thread = std::this_thread::get_id()} {
  if (env_.hooks) env_.hooks->before_stage(event_);
}

void StageRunScope::finish_event() {
  event_.end = StageEvent::Clock::now();
  event_.end_thread = std::this_thread::get_id();
}

void StageRunScope::succeeded() {
  finish_event();
  if (env_.hooks) env_.hooks->after_stage(event_);
}

void StageRunScope::failed(std::exception_ptr error) {
  finish_event();
  if (env_.hooks) env_.hooks->stage_failed(event_, error);
  try {
    std::rethrow_exception(std::move(error));
  } catch (const StageError&) { throw; } catch (const OperationCancelled&) {
    throw;
  } catch (...) { throw StageError(env_.job_name, std::string(event_.stage)); }
}

}  // namespace aotpipe
