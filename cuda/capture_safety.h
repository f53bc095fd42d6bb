#pragma once
// Whether a graph can be replayed as a CUDA graph, decided from the graph alone (no GPU needed).
// A CUDA graph replays the kernels its capture launched, with the arguments they had then: any
// work done on the host during the capture (a CPU op, a host sync, a value read back to decide a
// shape) is frozen at its captured result, so a graph that does any is refused and runs in the
// interpreter. See docs/cuda-graphs.md.
#include <aotpipe/graph/graph.h>

#include <optional>
#include <string>
#include <vector>

namespace aotpipe {

// Why `graph` cannot be captured, naming the op, value or input; nullopt when it can. Refused:
//  - a tensor input on another device than CUDA, except a 0-dim CPU tensor (a scalar: the
//    runtime copies it into device memory at each call);
//  - an op that makes a tensor off the GPU (its kernel would run once, at capture);
//  - an op whose output depends on data (item, nonzero, masked_select...: a host sync);
//  - a graph that launches no kernel (only views of its inputs): there is nothing to replay;
//  - an op that writes into a graph input (an inference graph's mutation epilogue, kept in the
//    graph by keep_inference_input_mutations): the replay writes into the runtime's copy of the
//    input, not into the caller's tensor.
// Random ops are not refused: a capture registers the default CUDA generator, so every replay
// draws new numbers from the same distribution (docs/cuda-graphs.md).
std::optional<std::string> cuda_graph_refusal(const Graph& graph);

// Per graph output: true when it is RNG state that no kernel reads, which the kernel makes on the
// host although the graph says the GPU (as Python's fake tensors do): the philox seed and offset
// _scaled_dot_product_efficient_attention returns when its dropout is a constant 0. A replay may
// hand out the ones its capture made; any other output a capture leaves on the host is refused.
std::vector<bool> unread_host_outputs(const Graph& graph);

}  // namespace aotpipe
