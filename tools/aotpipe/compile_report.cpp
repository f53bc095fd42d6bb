#include "aotpipe/compile_report.h"
#include "aotpipe/joint_dot.h"

#include <aotpipe/graph/memory_plan.h>
#include <aotpipe/graph/memory_schedule.h>
#include <aotpipe/graph/printer.h>
#include <aotpipe/pipeline/identified.h>
#include <aotpipe/stages/metadata/collect_metadata.h>
#include <aotpipe/stages/partition/default_partition.h>
#include <aotpipe/stages/partition/min_cut_partition.h>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdlib>
#include <span>
#include <stdexcept>
#include <utility>
#include <fstream>

namespace aotpipe::cli {
namespace {

std::size_t count_calls(const Graph& graph) {
  std::size_t n = 0;
  for (const Node* node : graph.nodes()) n += node->is_call() ? 1 : 0;
  return n;
}

PartitionNumbers numbers_of(const PartitionResult& p) {
  return {p.saved_values.size(), p.saved_bytes, p.recomputed.size()};
}

void write_file(const std::filesystem::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
  out.close();
  if (!out) throw std::runtime_error(fmt::format("cannot write {}", path.string()));
}

// Graphviz may be missing or fail on a huge graph; the DOT file is written either way.
void render_svg(const std::filesystem::path& dot, const std::filesystem::path& svg) {
  const std::string command = fmt::format("dot -Tsvg '{}' -o '{}' 2>/dev/null", dot.string(), svg.string());
  if (std::system(command.c_str()) != 0)
    spdlog::warn("could not render {} (is Graphviz `dot` installed?)", svg.string());
}

}  // namespace

GraphSummary summarize(const CompileState& state) {
  GraphSummary s;
  if (state.traced.joint) {
    s.training = true;
    s.ops = count_calls(state.traced.joint->graph);
    // The compile's own partition says which partitioner made it (the partition stage records
    // it): reuse it rather than partition again (a partition costs as much as the partition
    // stage; on a cache hit nothing else partitions).
    auto numbers = [&](const Partitioner& partitioner) {
      if (state.partition && !state.partition->partitioner.empty() &&
          identity_of(partitioner) == state.partition->partitioner)
        return numbers_of(*state.partition);
      return numbers_of(partitioner(*state.traced.joint));
    };
    s.default_partition = numbers(partitioners::default_partition());
    s.min_cut = numbers(partitioners::min_cut_rematerialization_partition());
  } else if (state.traced.inference_graph) {
    s.ops = count_calls(*state.traced.inference_graph);
  }
  if (state.partition) {
    s.forward_ops = count_calls(state.partition->forward);
    s.backward_ops = count_calls(state.partition->backward);
  } else if (state.traced.inference_graph) {
    s.forward_ops = s.ops;
  }
  return s;
}

// What graph/memory_plan.h plans for a graph's intermediates: one arena against the most bytes
// alive at once and against no reuse at all.
std::string memory_plan_line(const Graph& graph) {
  const MemoryPlan plan = plan_memory(graph);
  if (auto overlap = plan_overlap(plan))
    throw std::logic_error(fmt::format("memory plan of graph '{}' is unsound: {}", graph.name(), *overlap));
  return fmt::format(
      "memory plan of {}: {} intermediates in an arena of {} bytes (most alive at once {}, each in "
      "its own memory {}); {} escape the call",
      graph.name(), plan.tensors.size(), plan.arena_bytes, plan.peak_live_bytes, plan.unshared_bytes, plan.escaping);
}

// The biggest tensors alive at a graph's estimated peak: what to look at when a step holds more
// than it should.
std::string alive_at_peak_line(const Graph& graph, std::span<const InputLifetime> inputs) {
  constexpr std::size_t kShown = 12;
  const std::vector<const Value*> alive = alive_at_peak(graph, inputs);
  std::vector<std::string> shown;
  for (std::size_t i = 0; i < std::min(alive.size(), kShown); ++i)
    shown.push_back(fmt::format("%{} {}", alive[i]->name(), alive[i]->meta() ? to_string(*alive[i]->meta()) : "-"));
  return fmt::format("alive at the estimated peak of {}: {} tensors{}{}{}", graph.name(), alive.size(),
                     shown.empty() ? "" : ", the biggest ", fmt::join(shown, ", "),
                     alive.size() > kShown ? ", ..." : "");
}

std::string partition_report(const CompileState& state, const GraphSummary& summary) {
  if (!state.traced.joint || !state.partition) {
    std::string report = fmt::format(
        "{}: inference compile (no input requires grad, or grad mode off): nothing to partition.\n", state.name);
    if (state.traced.inference_graph) report += memory_plan_line(*state.traced.inference_graph) + "\n";
    return report;
  }
  const PartitionResult& p = *state.partition;
  fmt::memory_buffer out;
  auto line = [&](const std::string& text) { fmt::format_to(std::back_inserter(out), "{}\n", text); };
  line(fmt::format("{}: joint graph {} ops -> forward {} ops, backward {} ops", state.name, summary.ops,
                   summary.forward_ops, summary.backward_ops));
  line(fmt::format("saved for the backward: {} values, {} bytes", p.saved_values.size(), p.saved_bytes));
  for (const std::string& name : p.saved_values) {
    const Value* v = state.traced.joint->graph.find_value(name);
    const TensorMeta* meta = v ? v->meta() : nullptr;
    line(fmt::format("  %{:<24} {:>12} bytes  {}", name, meta ? meta->nbytes() : 0, meta ? to_string(*meta) : "-"));
  }
  line(fmt::format("recomputed in the backward: {} ops", p.recomputed.size()));
  for (const std::string& label : p.recomputed) line("  " + label);
  line("saved bytes by partitioner:");
  line(fmt::format("  default_partition                    {:>12}", summary.default_partition->saved_bytes));
  line(fmt::format("  min_cut_rematerialization_partition  {:>12}", summary.min_cut->saved_bytes));
  for (const auto& [graph, schedule] :
       {std::pair{&p.forward, p.forward_schedule}, std::pair{&p.backward, p.backward_schedule}})
    line(fmt::format("order of {} for peak memory: {}, estimated peak {} bytes (in the traced order {})", graph->name(),
                     to_string(schedule.method), schedule.peak_after, schedule.peak_before));
  line(alive_at_peak_line(p.backward, p.backward_input_lifetimes));
  line(memory_plan_line(p.forward));
  line(memory_plan_line(p.backward));
  return fmt::to_string(out);
}

void write_graph_outputs(const CompileState& state, const GraphSummary& summary, const std::filesystem::path& dir,
                         bool svg) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) throw std::runtime_error(fmt::format("cannot create {}: {}", dir.string(), ec.message()));
  write_file(dir / "metadata.json", to_json(state.function.meta));
  write_file(dir / "partition.txt", partition_report(state, summary));
  if (state.traced.inference_graph) write_file(dir / "inference.aotg", print_graph(*state.traced.inference_graph));
  if (!state.traced.joint || !state.partition) return;
  write_file(dir / "joint.aotg", print_graph(state.traced.joint->graph));
  write_file(dir / "forward.aotg", print_graph(state.partition->forward));
  write_file(dir / "backward.aotg", print_graph(state.partition->backward));
  write_file(dir / "joint.dot", joint_graph_dot(*state.traced.joint, *state.partition));
  // Graphviz lays out a few hundred nodes in about a minute (an LSTM's joint graph), far longer
  // than the compile: larger joints keep their joint.dot only.
  if (svg && state.traced.joint->graph.num_nodes() <= kMaxSvgNodes) render_svg(dir / "joint.dot", dir / "joint.svg");
}

}  // namespace aotpipe::cli
