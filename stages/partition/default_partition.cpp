#include <aotpipe/stages/partition/default_partition.h>

#include <aotpipe/stages/partition/internal/extract.h>
#include <aotpipe/stages/partition/internal/joint_view.h>

#include <unordered_set>

namespace aotpipe::partitioners {

PartitionResult default_partition(const JointGraph& joint) {
  using namespace detail;
  const JointView view = build_joint_view(joint.graph, joint.num_primals, joint.num_fwd_outputs);
  const std::size_t n = view.nodes.size();

  // "Respect the original placement of ops rather than rely on dataflow": the forward ends at
  // the last node tagged forward (primals count as tagged).
  bool any_tag = false;
  for (const PNode& p : view.nodes) any_tag = any_tag || p.tagged_forward || p.tagged_backward;
  std::vector<char> is_forward(n, 0);
  if (any_tag) {
    std::size_t last = 0;
    bool found = false;
    for (std::size_t i = 0; i < n; ++i) {
      const PNode& p = view.nodes[i];
      if (p.kind != PKind::Output && (p.is_primal || p.tagged_forward)) {
        last = i;
        found = true;
      }
    }
    // A node that depends on a tangent cannot run in the forward even if it comes before a
    // forward-tagged node (e.g. the `copy_` of a kept input mutation the tracer appends last).
    std::vector<char> from_tangents(n, 0);
    for (std::size_t i = 0; i < n; ++i) {
      from_tangents[i] = static_cast<char>(view.nodes[i].is_tangent);
      for (int in : view.nodes[i].inputs)
        from_tangents[i] = static_cast<char>(from_tangents[i] || from_tangents[static_cast<std::size_t>(in)]);
    }
    if (found)
      for (std::size_t i = 0; i <= last; ++i)
        is_forward[i] = static_cast<char>(!from_tangents[i] && view.nodes[i].kind != PKind::Output);
  } else {
    // No phase tags (e.g. a graph read from text without them): the forward is what the forward
    // outputs need, by data flow.
    is_forward = classify_nodes(view).required_fw;
  }

  std::vector<Value*> saved, saved_numbers;
  for (std::size_t i = 0; i < n; ++i) {
    if (!is_forward[i]) continue;
    const PNode& p = view.nodes[i];
    if (p.kind == PKind::Tuple) continue;  // its results are saved one by one (getitems)
    if (p.is_sym) {
      saved_numbers.push_back(p.value);
      continue;
    }
    if (p.mutable_op) {
      saved.push_back(p.value);
      continue;
    }
    std::vector<int> backward_usages;
    for (int u : p.users)
      if (!is_forward[static_cast<std::size_t>(u)]) backward_usages.push_back(u);
    bool only_numbers = true;
    for (int u : backward_usages) only_numbers = only_numbers && view.nodes[static_cast<std::size_t>(u)].is_sym;
    if (only_numbers) {
      // Only sizes are needed later: save those numbers, not the tensor.
      for (int u : backward_usages) saved_numbers.push_back(view.nodes[static_cast<std::size_t>(u)].value);
      continue;
    }
    saved.push_back(p.value);
  }
  saved.insert(saved.end(), saved_numbers.begin(), saved_numbers.end());
  return assemble_partition(joint.graph, view, std::move(saved), /*autograd_order=*/false,
                            /*reorder_for_peak_memory=*/true);
}

Partitioner default_partition() {
  return named_partitioner("aotpipe.default_partition/2",
                           [](const JointGraph& joint) { return default_partition(joint); });
}

}  // namespace aotpipe::partitioners

namespace aotpipe {

Partitioner named_partitioner(std::string identity, Partitioner partitioner) {
  return Identified<PartitionResult(const JointGraph&)>{std::move(identity), std::move(partitioner)};
}

}  // namespace aotpipe
