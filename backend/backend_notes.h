#pragma once
// Side channels between the compile stage and a backend compiler, which sees one graph at a time
// and returns only a callable:
//  - notes: what a backend says about the graph it is compiling, a decision the user should see
//    in the compile result (a graph the CUDA-graph backend will not capture, and why);
//    compile_graphs collects every note made on its thread during a compiler call into
//    CompiledGraphs::notes;
//  - the compile group: the graphs of one compiled function (its forward and backward, or its
//    inference graph) are compiled in one group, where a backend keeps what they share (the
//    CUDA-graph backend: one memory pool for both captures);
//  - the output use: what the runtime does with the outputs of the graph being compiled, where
//    the caller knows (a training forward's saved values go to its backward only).
#include <functional>
#include <cstddef>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
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

// What the graphs of one compiled function share. Thread-safe: its forward and backward may be
// compiled at once, or each at its first call (a cache hit).
class CompileGroup {
 public:
  // The object kept under `key` (a backend's name), made by `make` at the first request.
  std::shared_ptr<void> shared(std::string_view key, const std::function<std::shared_ptr<void>()>& make);

 private:
  std::mutex mutex_;
  std::map<std::string, std::shared_ptr<void>, std::less<>> shared_;
};

// What the runtime does with a compiled graph's outputs. A training forward returns the values
// its caller sees, then the values saved for the backward: from `saved_outputs_from` on, outputs
// go to the backward graph only (the runtime saves them in the autograd node and drops them when
// the backward has run), never to the user. A backend may hand those over without copying them
// out of memory it keeps (the CUDA-graph backend lends them, docs/cuda-graphs.md).
struct GraphOutputUse {
  std::optional<std::size_t> saved_outputs_from;  // empty: every output may reach the user
  // An inference graph: run without autograd, no backward follows (the interpreter backends fold
  // its constant subgraphs, InterpreterOptions::fold_constants).
  bool inference = false;
};

// The group of the compiler call running on this thread; null outside one (a backend then
// shares nothing).
CompileGroup* current_compile_group();
// The output use of the graph being compiled on this thread ({} outside a compiler call).
GraphOutputUse current_graph_output_use();

// While alive, `group` is this thread's current compile group and `use` the output use of the
// graph compiled in it (nests like BackendNoteCollector).
class CompileGroupScope {
 public:
  explicit CompileGroupScope(CompileGroup* group, GraphOutputUse use = {});
  ~CompileGroupScope();
  CompileGroupScope(const CompileGroupScope&) = delete;
  CompileGroupScope& operator=(const CompileGroupScope&) = delete;

 private:
  CompileGroup* outer_;
  GraphOutputUse outer_use_;
};

}  // namespace aotpipe
