#pragma once
// Runs a Graph on real tensors through boxed dispatcher calls.
//
// Built once per graph: operator handles resolved, every value given a slot in a value table,
// the last use of each value computed. A run moves its inputs into a fresh table (so the
// caller may give up its references and let inputs be freed early), hands each value to its
// last reader by move and drops values nobody reads, so memory is released as soon as
// possible (and, with InterpreterOptions::reinplace, reused in place). run() is const and may be
// called from many threads at once.
#include <aotpipe/graph/graph.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

namespace aotpipe {

struct InterpreterOptions {
  // Compare every tensor an op produces with its declared TensorMeta (sizes, strides, dtype)
  // and throw naming the value on a mismatch. For tests and debugging: it costs a check per op.
  bool check_meta = false;
  // Re-inplacing (Inductor's reinplace pass, at run time): a pointwise op whose `self` is an
  // intermediate read for the last time, with the result's dtype, sizes and strides, runs its
  // in-place twin (`add_` for `add`) and writes into self instead of allocating. Decided per call:
  // only when nothing else holds the tensor or its storage (a view, a saved tensor, the caller) and
  // it does not require grad, so no one can observe the write. Values are unchanged.
  bool reinplace = false;
  // Memory planning (Static Runtime's out variants and arena): the calls whose op has an out=
  // kernel for the graph's device (graph/op_properties.h, out_variant) write their results into
  // one arena per run, at the offsets of the graph's memory plan (graph/memory_plan.h), instead of
  // allocating each. What escapes the run (outputs and their bases) is never placed there. A run
  // whose inputs differ from the graph's TensorMeta (sizes, strides, dtype), or that would record
  // autograd history (grad mode on, an input requiring grad), runs without the plan; a call whose
  // out kernel refuses runs its functional op from then on (one whose out kernel runs out of memory,
  // for that run only). Values are unchanged.
  bool plan_memory = false;
  // Constant folding (graph/constant_folding.h): the calls whose results depend on no input of
  // the graph, only on its constants (masks from `full` and `triu`, position ids from `arange`),
  // run once, at the first run, and their results are kept for every later run, as the graph's
  // constants are. Never a random or mutating op, nor a result a caller receives.
  bool fold_constants = false;
};

// Process-wide counts of InterpreterOptions::plan_memory and fold_constants, for tests and monitoring.
struct InterpreterCounters {
  std::uint64_t planned_runs = 0;       // runs of a planned graph that used its arena
  std::uint64_t unplanned_runs = 0;     // runs of a planned graph whose inputs did not fit the plan
  std::uint64_t out_calls_refused = 0;  // calls whose out= kernel refused (each then runs its functional op)
  std::uint64_t folded_calls = 0;       // InterpreterOptions::fold_constants: calls computed once, at a first run
  // calls whose out= kernel found no memory for a workspace: each ran its functional op, and the
  // next run asks the out kernel again (a lack of the moment, not a refusal)
  std::uint64_t out_calls_out_of_memory = 0;
};
InterpreterCounters interpreter_counters();

// InterpreterOptions::plan_memory keeps the arena a thread's runs finished with, one per stream,
// for the thread's next run (as a caching allocator keeps freed blocks). This frees every thread's
// (autograd's device threads and a pool's too; a run under way keeps its own); a thread's are also
// freed when it exits. cached_arena_bytes() is what they hold, over all threads.
void release_cached_arenas();
std::size_t cached_arena_bytes();

class Interpreter {
 public:
  explicit Interpreter(const Graph& graph, InterpreterOptions options = {});
  ~Interpreter();
  Interpreter(Interpreter&&) noexcept;
  Interpreter& operator=(Interpreter&&) noexcept;

  // Inputs by value: pass std::move(args) to let the graph free them early.
  std::vector<at::Tensor> run(std::vector<at::Tensor> inputs) const;
  // For graphs with non-tensor inputs or outputs.
  std::vector<c10::IValue> run_boxed(std::vector<c10::IValue> inputs) const;

  std::size_t num_slots() const;
  // Calls that InterpreterOptions::reinplace may run in place (each still checks at run time).
  std::size_t num_reinplaceable() const;
  // InterpreterOptions::plan_memory: the calls writing into the arena, and its bytes (0: no plan).
  std::size_t num_planned_calls() const;
  std::size_t arena_bytes() const;
  // InterpreterOptions::fold_constants: the calls run once instead of at every run.
  std::size_t num_folded_calls() const;

 private:
  struct Program;
  std::shared_ptr<const Program> program_;
};

}  // namespace aotpipe
