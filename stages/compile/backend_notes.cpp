#include <aotpipe/stages/compile/backend_notes.h>

namespace aotpipe {

namespace {
thread_local BackendNoteCollector* current_collector = nullptr;
}  // namespace

BackendNoteCollector::BackendNoteCollector() : outer_(current_collector) { current_collector = this; }

BackendNoteCollector::~BackendNoteCollector() { current_collector = outer_; }

void report_backend_note(std::string note) {
  if (current_collector) current_collector->notes_.push_back(std::move(note));
}

}  // namespace aotpipe
