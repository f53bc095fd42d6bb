#pragma once
// The CUDA-graph backend: each compiled graph is captured into a CUDA graph at its first call and
// replayed after, one launch per call instead of one per op (what PyTorch's
// make_graphed_callables and torch.compile's "reduce-overhead" mode do). Rules, refusals and
// memory: docs/cuda-graphs.md.
//
//   aotpipe::AotConfig config;
//   config.fw_compiler = aotpipe::backends::cuda_graphs();   // backward and inference follow
//   aotpipe::CompiledFunction f = aotpipe::aot_function(fn, config);
//
// Thread safety: a compiled graph may be called from any number of threads on any streams;
// replays of one captured graph are serialized, on the host and on the GPU (each waits for the
// previous one's copies), so they never share its static memory. Different graphs run in
// parallel.
#include <aotpipe/graph/calling_convention.h>

#include <cstdint>

namespace aotpipe {

struct CudaGraphOptions {
  enum class Outputs : std::uint8_t {
    // Every call hands out outputs in fresh memory, copied out of the graph's static outputs
    // (one batched copy): results stay valid whatever the caller keeps and the next replay does.
    fresh,
    // Outputs alias the graph's static memory: no copy, but they hold only until the next call
    // of the same graph. A call made while outputs of the previous one are still alive (the
    // caller holds them, or autograd saved them for a pending backward) runs in the interpreter
    // instead of overwriting them. Use them on the calling stream, or synchronize first.
    static_alias,
  };
  Outputs outputs = Outputs::fresh;
  // With Outputs::fresh: a training forward's saved values (outputs only its backward reads) are
  // lent out of the static memory instead of copied out, and the backward reads them there, in
  // place: no copy out of the forward and none into the backward. A lent value still alive when
  // the forward replays again (a second forward before the first's backward) is copied out
  // then, so it keeps its value. Off by default until a GPU run has measured and tested it
  // (docs/cuda-graphs.md); off: copied out like every other output.
  bool lend_saved_outputs = false;
  // Leaf inputs that require grad (parameters) are read in place, by address, instead of being
  // copied in at every call: in-place updates (an optimizer step) are seen by the next replay.
  // A call where such an input has moved runs in the interpreter (warned once per graph).
  bool static_parameters = true;
};

// Process-wide counts, for tests and monitoring.
struct CudaGraphCounters {
  std::uint64_t captures = 0;            // graphs captured
  std::uint64_t replays = 0;             // calls served by a replay
  std::uint64_t fallback_calls = 0;      // calls of a captured (or capture-refused) graph run by the interpreter
  std::uint64_t memory_pools = 0;        // private memory pools made: one per compiled function (its
                                         // forward and backward share it), one per graph with static_alias
  std::uint64_t lent_values = 0;         // storages of saved values lent instead of copied out (lend_saved_outputs)
  std::uint64_t lent_inputs_read = 0;    // backward inputs a replay read in place, where the forward lent them
  std::uint64_t lent_values_copied = 0;  // lent storages taken back (copied): alive at their forward's next replay,
                                         // or read by a call the interpreter ran
};
CudaGraphCounters cuda_graph_counters();

namespace backends {

// A Compiler that captures the graph into a CUDA graph at its first call (after one warm-up run
// on a side stream) and replays it from then on. A graph refused by cuda_graph_refusal
// (cuda/capture_safety.h) is compiled to the interpreter, with the reason as a backend note of
// the compile (CompiledGraphs::notes); a graph whose capture fails at run time is too, and warns.
// The graphs of one compiled function capture into one private memory pool (with
// Outputs::fresh), so their replays are serialised with each other (docs/cuda-graphs.md).
Compiler cuda_graphs(CudaGraphOptions options = {});

}  // namespace backends
}  // namespace aotpipe
