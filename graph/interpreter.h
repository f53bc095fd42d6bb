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
};

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

 private:
  struct Program;
  std::shared_ptr<const Program> program_;
};

}  // namespace aotpipe
