#pragma once
// The tracer: captures the ATen ops a C++ callable runs into a Graph, like PyTorch's make_fx
// under FakeTensorMode (+ FunctionalTensorMode when functionalizing). See docs/tracer.md.
//
// The callable runs once on "tracing tensors" (a TensorImpl subclass wrapping a meta tensor in
// fake mode, a real tensor in real mode); a boxed fallback on the dispatcher's `Fake` key
// records every op that reaches it. Autograd runs above that key, so a callable that calls
// torch::autograd::grad records its backward too (a joint graph); CompositeImplicitAutograd
// ops decompose before being recorded (`linear` -> `t` + `addmm`), as in make_fx.
#include <aotpipe/graph/calling_convention.h>
#include <aotpipe/graph/graph.h>

#include <ATen/core/Tensor.h>
#include <ATen/core/ivalue.h>

#include <cstddef>
#include <functional>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace aotpipe {

using TraceFunction = Function;

enum class TraceMode {
  Fake,  // shapes only: inner tensors are meta tensors; no data is computed
  Real,  // inner tensors are real: ops run for real (data-dependent code is allowed)
};

// A function traced in place of an op: receives the op's arguments in schema order (tracing
// tensors, scalars, lists) and returns its results in schema order. It runs below autograd,
// so the ops it calls are recorded as they are (they are not functionalized again: call
// functional ops). It must not call the op it replaces.
using Decomposition = std::function<std::vector<c10::IValue>(const std::vector<c10::IValue>& args)>;

// Ops that ran their CPU kernel on zero-filled stand-ins during a fake trace (no Meta kernel):
// qualified overload name -> number of calls. Empty for a truly fake trace.
using CpuFallbackCounts = std::map<std::string, std::size_t>;

// What a trace shows an analysis while its tensors are still alive (TraceOptions::inspect). The
// metadata-collection stage reads functionalization and autograd state from these.
struct TraceInspection {
  const TensorList& example_inputs;  // as passed to the trace
  const TensorList& initial_inputs;  // the tracing tensors made from them (fake: meta inside), unchanged
  const TensorList& inputs;          // what the callable received (functional wrappers when functionalizing)
  const TensorList& outputs;         // what the callable returned
  // The storage of each input as the callable received it (before any set_()). Owning: after a
  // set_() an input's first storage would otherwise be freed, and a later output's storage could
  // take its address and pass for an alias of the input.
  const std::vector<c10::Storage>& input_storages;
  // The ops run on the CPU fallback so far (the callable's own calls, not a backward's).
  const CpuFallbackCounts& cpu_fallbacks;
};

struct TraceOptions {
  TraceMode mode = TraceMode::Fake;
  // Functionalize (like FunctionalTensorMode): the graph has no in-place or out= op; inputs
  // mutated by the callable get their final value appended to the graph outputs.
  bool functionalize = false;
  // Qualified overload name ("aten::gelu", "aten::add.Tensor") -> traced replacement.
  std::map<std::string, Decomposition> decompositions;
  // Fake mode: an op with no Meta kernel in C++ (aten::relu, native_batch_norm...) runs its CPU
  // kernel on zero-filled tensors of the same layout to learn output metadata (what Python's
  // FakeTensorMode.run_fallback_kernel does). false: such an op is a TraceError.
  // Every fallback call is counted in TraceResult::cpu_fallbacks; aotpipe registers Meta kernels
  // for the ops models use (tracer/meta/), so a compile of them makes none.
  bool allow_cpu_fallback = true;
  // Remove nodes whose values are unused (functionalization leaves dead views behind).
  bool eliminate_dead_code = true;
  // Graph input names; empty: arg0, arg1, ... (trace_joint: primals_1..., tangents_1...).
  std::vector<std::string> input_names;
  std::string graph_name = "traced";
  // Functionalize: what happens to inputs the callable mutated. By default their final values
  // are appended to the graph outputs. Inputs k with keep_input_mutations_in_graph[k] get an
  // `aten::copy_(input, final)` at the end of the graph instead (AOTAutograd's
  // keep_input_mutations); with return_mutated_inputs = false the others are left to the
  // caller (which returns them itself, as the joint and inference stages do).
  bool return_mutated_inputs = true;
  std::vector<bool> keep_input_mutations_in_graph;
  // trace_joint: which outputs get a tangent input (empty: every output that requires grad).
  // A masked output gets a tangent even when it does not require grad (the tangent is unused),
  // so the tangents match AOTAutograd's traced_tangents one for one.
  std::vector<bool> tangent_mask;
  // Called once the callable has returned, before the graph is finished (trace_program only).
  std::function<void(const TraceInspection&)> inspect;
  // trace_joint only: decides the backward once the callable has returned, from what `inspect`
  // would see. It may change the outputs (AOTAutograd's prepare_forward returns mutated inputs
  // first and intermediate bases last) and returns the tangent mask over the outputs so changed
  // (overriding tangent_mask), or std::nullopt for no backward: the trace of those outputs then
  // ends as trace_program's would (no tangents, no gradients, no phase attribute). One trace thus
  // serves an analysis and, where it allows, the joint or inference program.
  std::function<std::optional<std::vector<bool>>(const TraceInspection&, TensorList& outputs)> plan_backward;
};

// Any failure while tracing: the message names the op (e.g. "aten::nonzero: ...").
class TraceError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Adds `more` into `into`.
void merge_cpu_fallbacks(CpuFallbackCounts& into, const CpuFallbackCounts& more);
// The total number of calls.
std::size_t total_cpu_fallback_calls(const CpuFallbackCounts& counts);

// What the trace learned about inputs and outputs beyond the graph itself.
struct TracedInputInfo {
  bool mutates_data = false;      // functionalize only: the callable wrote the input's data
  bool mutates_metadata = false;  // functionalize only: sizes/strides/offset changed (t_, as_strided_)
  bool mutates_storage = false;   // functionalize only: set_ swapped its storage
  // Index in Graph::outputs() of the input's final value (functionalize, mutated inputs only).
  std::optional<std::size_t> mutated_output_index;
};

struct TracedOutputInfo {
  bool is_input = false;                      // the output is an input tensor itself
  std::optional<std::size_t> aliased_input;   // the output shares storage with this input
  std::optional<std::size_t> aliased_output;  // ...or with this earlier output
};

struct TraceResult {
  Graph graph{"traced"};
  std::size_t num_user_outputs = 0;  // the callable's outputs come first in graph.outputs()
  std::vector<TracedInputInfo> inputs;
  std::vector<TracedOutputInfo> outputs;  // one per user output
  bool has_backward = false;              // some node ran inside the autograd engine
  std::size_t num_tangents = 0;           // trace_joint: trailing graph inputs that are tangents
  std::size_t num_grad_outputs = 0;       // trace_joint: outputs that are gradients
  // trace_joint: gradient outputs (0-based among them) that autograd left undefined (the input
  // does not influence any differentiable output); the graph returns zeros there.
  std::vector<std::size_t> undefined_grads;
  // trace_joint: the inputs the gradient outputs are for, in order: those that require grad
  // once the callable has returned (it may have called requires_grad_ on an input).
  std::vector<std::size_t> grad_inputs;
  // Fake mode: the ops that fell back to their CPU kernel, with their call counts.
  CpuFallbackCounts cpu_fallbacks;
};

// Traces `fn` on tracing tensors made from `example_inputs` (sizes, strides, offset, dtype,
// device, requires_grad, leafness and aliasing between inputs kept; real inputs are never
// modified). A tensor passed twice is one tracing tensor (the second graph input is unused), as
// in AOTAutograd, so a mutation through one position is seen through the other.
// Closed-over tensors become graph constants (Graph::add_constant); factory ops are captured.
// In a graph with a backward part every node has attrs()["phase"] = "forward" | "backward".
TraceResult trace_program(const TraceFunction& fn, const TensorList& example_inputs, TraceOptions options = {});
Graph trace(const TraceFunction& fn, const TensorList& example_inputs, TraceOptions options = {});

// The joint forward+backward graph of `fn` (AOTAutograd's create_joint): inputs are the
// primals (example_inputs) then one tangent per output that requires grad (contiguous, same
// sizes and dtype); outputs are fn's outputs, then the gradient of each input that requires
// grad (zeros when unused), then (functionalize) the final values of mutated inputs.
TraceResult trace_joint(const TraceFunction& fn, const TensorList& example_inputs, TraceOptions options = {});

// True when `tensor` is a tracing tensor of a trace in progress (for code that wants to know).
bool is_tracing_tensor(const at::Tensor& tensor);

}  // namespace aotpipe
