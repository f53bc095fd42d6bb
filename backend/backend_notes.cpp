#include <aotpipe/backend/backend_notes.h>

namespace aotpipe {

namespace {
thread_local BackendNoteCollector* current_collector = nullptr;
}  // namespace

BackendNoteCollector::BackendNoteCollector() : outer_(current_collector) { current_collector = this; }

BackendNoteCollector::~BackendNoteCollector() { current_collector = outer_; }

void report_backend_note(std::string note) {
  if (current_collector) current_collector->notes_.push_back(std::move(note));
}

namespace {
thread_local CompileGroup* current_group = nullptr;
thread_local GraphOutputUse current_use;
}  // namespace

std::shared_ptr<void> CompileGroup::shared(std::string_view key, const std::function<std::shared_ptr<void>()>& make) {
  const std::lock_guard lock(mutex_);
  auto it = shared_.find(key);
  if (it == shared_.end()) it = shared_.emplace(std::string(key), make()).first;
  return it->second;
}

CompileGroup* current_compile_group() { return current_group; }

GraphOutputUse current_graph_output_use() { return current_use; }

CompileGroupScope::CompileGroupScope(CompileGroup* group, GraphOutputUse use)
    : outer_(current_group), outer_use_(current_use) {
  current_group = group;
  current_use = use;
}

CompileGroupScope::~CompileGroupScope() {
  current_group = outer_;
  current_use = outer_use_;
}

}  // namespace aotpipe
