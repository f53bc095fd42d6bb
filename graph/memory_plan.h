#pragma once
// Memory planning of the tensors a graph's calls allocate, as PyTorch's Static Runtime and
// NativeRT plan theirs: each such tensor lives from the call that makes it to the last call that
// reads it or any view of it, and gets an offset in one arena, placed greedy by size, so that two
// tensors alive at once never share a byte. Memory from outside the calls (inputs, constants) is
// not planned, nor what escapes the call: a graph output or a view of one.
//
// The plan is data: a backend that runs the graph decides how to use it (an arena and _out
// kernels, a CUDA graph's pool); plan_overlap() checks any plan, whoever made it.
#include <aotpipe/graph/graph.h>

#include <cstddef>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace aotpipe {

// The value whose call allocated v's memory: v itself for a fresh result, its base for a view
// (followed through `self` of the alias-annotated returns, list returns included, and of the ops
// whose schemas hide that their results are views: returns_hidden_view); nullptr for memory that came from
// outside the graph's calls (an input, a constant).
const Value* allocation_of(const Value& v);
// The same walk, stopping at a graph input too: the input whose memory v is (v itself or a view
// of it); nullptr only for constants and non-tensor results.
const Value* memory_root(const Value& v);
// One step of that walk: the index in node.args() of the tensor argument whose memory output `k`
// of the call is a view of; nullopt for a fresh result, a result that is not a tensor, and a
// node that is not a call.
std::optional<std::size_t> viewed_argument(const Node& node, std::size_t k);

// The arguments a call may write its result into, were it their last read (re-inplacing,
// InterpreterOptions::reinplace): `self`, or `other` of add with alpha 1 and of mul, when the op
// has an in-place twin and the argument is memory the graph allocated with the result's dtype,
// sizes, strides and offset. Best first; empty for most calls. Whether the write happens is
// decided when the call runs (nothing else may hold the memory).
std::vector<std::size_t> reinplace_candidates(const Node& node);

struct PlannedTensor {
  const Value* value = nullptr;  // the fresh result that owns the memory
  std::size_t bytes = 0;         // its storage, rounded up to MemoryPlan::kAlignment
  std::size_t first = 0;         // index in graph.nodes() of the call that makes it
  std::size_t last = 0;          // index of the last call that reads it or a view of it
  std::size_t offset = 0;        // where it starts in the arena
};

struct MemoryPlan {
  static constexpr std::size_t kAlignment = 64;  // c10's CPU alignment, and a CUDA sector's

  std::vector<PlannedTensor> tensors;  // in the order of their calls
  std::size_t arena_bytes = 0;         // the plan: one allocation of this size holds them all
  std::size_t peak_live_bytes = 0;     // the most bytes alive at once: no plan is smaller
  std::size_t unshared_bytes = 0;      // all of them, each in its own memory (no reuse)
  std::size_t escaping = 0;            // fresh results not planned: outputs (or their bases), list results
  std::size_t unsized = 0;             // fresh results without TensorMeta (an undefined gradient): not planned
  std::size_t unplaced = 0;            // fresh results of calls the caller keeps out of the plan
};

// Whether a call's fresh results may be placed in the arena: the backend can make the call write
// into memory it is given (an out= kernel). Empty: every call.
using PlaceableCall = std::function<bool(const Node&)>;

// The plan of `graph` for the order of its nodes, sized by the values' TensorMeta (shape
// propagation fills it). The fresh results of calls `placeable` refuses are not planned; their
// memory stays the kernel's.
MemoryPlan plan_memory(const Graph& graph, const PlaceableCall& placeable = {});

// The first two tensors alive at once whose bytes overlap, or a tensor that ends past the arena,
// described with their names, byte ranges and the node where both are alive; nullopt for a sound
// plan.
std::optional<std::string> plan_overlap(const MemoryPlan& plan);

}  // namespace aotpipe
