#pragma once
// What a backend compiler says about the graph it is compiling: a decision the user should see
// in the compile result (a graph the CUDA-graph backend will not capture, and why). A Compiler
// returns only a callable, so it reports through this side channel: compile_graphs collects
// every note made on its thread during a compiler call into CompiledGraphs::notes.
#include <string>
#include <vector>

namespace aotpipe {

// Adds `note` to the innermost BackendNoteCollector alive on this thread (dropped when none is:
// the compiler was called outside compile_graphs).
void report_backend_note(std::string note);

// While alive, collects this thread's report_backend_note calls. Nests: an inner collector hides
// the outer one until it is destroyed.
class BackendNoteCollector {
 public:
  BackendNoteCollector();
  ~BackendNoteCollector();
  BackendNoteCollector(const BackendNoteCollector&) = delete;
  BackendNoteCollector& operator=(const BackendNoteCollector&) = delete;

  std::vector<std::string> take() { return std::move(notes_); }

 private:
  friend void report_backend_note(std::string note);
  std::vector<std::string> notes_;
  BackendNoteCollector* outer_;
};

}  // namespace aotpipe
