#pragma once
// The order of a graph's calls decides how many bytes are alive at once: a weight's gradient made
// early stays alive through the rest of a backward, an activation read early dies early. This
// orders a graph's calls for the fewest bytes at once, as Inductor's reorder_for_peak_memory
// (torch/_inductor/memory.py) orders its kernels: an estimate of the peak of an order, and the
// "least peak memory first" greedy order (LPMF), kept only when its estimate is lower.
// Results are unchanged: only calls that do not depend on each other swap.
#include <aotpipe/graph/graph.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

namespace aotpipe {

// Who frees a graph's inputs while it runs.
enum class InputLifetime {
  HeldByCaller,       // the caller keeps them (a forward's parameters and inputs): never freed
  FreedAfterLastUse,  // the graph holds the only reference (a backward's saved tensors, which the
                      // runtime hands over): each dies after the last call reading it or a view
};

// The most bytes alive at once while `graph` runs in its order, the inputs the graph frees
// counted from the start. A tensor a call makes (a fresh result, elements of a fresh list
// included) is alive from that call to the last call that reads it or a view of it; a graph
// output, or the memory under one, never dies. Sizes are the storage extents of the values'
// TensorMeta; a value without one counts 0. `inputs`: one lifetime per graph input.
std::size_t estimate_peak_bytes(const Graph& graph, std::span<const InputLifetime> inputs);
std::size_t estimate_peak_bytes(const Graph& graph, InputLifetime all_inputs);

// What is alive at that peak (the first node where it is reached): the values owning the
// memory (fresh results and inputs), biggest first. Says what a peak is made of.
std::vector<const Value*> alive_at_peak(const Graph& graph, std::span<const InputLifetime> inputs);

enum class ScheduleMethod : std::uint8_t {
  Kept,                  // the order the graph came with: none estimated lower, or the graph mutates
  LeastPeakMemoryFirst,  // Inductor's LPMF greedy order
};
// "kept", "lpmf"; from_string gives nullopt for another text.
std::string_view to_string(ScheduleMethod method);
std::optional<ScheduleMethod> schedule_method_from_string(std::string_view text);

struct MemorySchedule {
  std::size_t peak_before = 0;  // the estimate of the order the graph came with
  std::size_t peak_after = 0;   // the estimate of the order it has now
  ScheduleMethod method = ScheduleMethod::Kept;
};

// Reorders `graph` when the LPMF order's estimated peak is at least 5% lower; otherwise leaves it
// (a smaller gain is within the estimate's error: it does not see kernels' workspaces).
// Calls with side effects (a mutable schema) leave the graph as it is; random calls keep their
// order among themselves, so that each draws what it drew before.
MemorySchedule schedule_for_peak_memory(Graph& graph, std::span<const InputLifetime> inputs);
MemorySchedule schedule_for_peak_memory(Graph& graph, InputLifetime all_inputs);

}  // namespace aotpipe
