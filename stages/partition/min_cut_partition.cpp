#include <aotpipe/stages/partition/min_cut_partition.h>

#include <aotpipe/graph/passes.h>
#include <aotpipe/stages/partition/cse.h>
#include <aotpipe/stages/partition/default_partition.h>
#include <aotpipe/stages/partition/internal/extract.h>
#include <aotpipe/stages/partition/internal/joint_view.h>
#include <aotpipe/stages/partition/op_classes.h>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <optional>
#include <queue>
#include <tuple>
#include <unordered_set>

namespace aotpipe::partitioners {
namespace {

using detail::JointView;
using detail::NodeInfo;
using detail::PKind;
using detail::PNode;

constexpr std::int64_t kFar = 1'000'000'000;  // PyTorch's int(1e9) distance

// The default op classes, or a changed copy when the options change the allowlist.
std::optional<OpTypes> changed_op_types(const MinCutOptions& options) {
  if (!options.recomputable_ops && options.extra_recomputable_ops.empty()) return std::nullopt;
  OpTypes ops = default_op_types();
  if (options.recomputable_ops) {
    ops.recomputable.clear();
    for (const auto& op : *options.recomputable_ops) ops.recomputable.insert(op);
  }
  for (const auto& op : options.extra_recomputable_ops) ops.recomputable.insert(op);
  ops.fusible = ops.recomputable;
  ops.fusible.insert(ops.random.begin(), ops.random.end());
  return ops;
}

// The network of solve_min_cut() for one joint graph, with what it was built from.
struct Problem {
  // The graph the partition reads: the joint itself, or its copy where CSE or dead-code
  // elimination changed something (`changed`). The joint outlives the partition.
  const Graph* graph = nullptr;
  std::optional<Graph> changed;
  JointView view;
  NodeInfo info;
  std::vector<std::int64_t> dist_from_bw;
  FlowNetwork network;
  std::vector<char> banned;
  std::vector<int> banned_order;  // in the order they were banned
};

int in_vertex(std::size_t i) { return static_cast<int>(2 + 2 * i); }
int out_vertex(std::size_t i) { return static_cast<int>(3 + 2 * i); }

class NetworkBuilder {
 public:
  NetworkBuilder(Problem& p, const MinCutOptions& options)
      : p_(p),
        options_(options),
        changed_ops_(changed_op_types(options)),
        ops_(changed_ops_ ? *changed_ops_ : default_op_types()) {
    // The op classes of every node, looked up once.
    for (const PNode& node : p_.view.nodes) {
      classes_.push_back({ops_.is_fusible(node.packet), ops_.is_view(node.packet), ops_.is_recomputable(node.packet),
                          ops_.is_random(node.packet), ops_.is_compute_intensive(node.packet),
                          node.packet == "aten::cat"});
    }
  }

  void build() {
    const auto& nodes = p_.view.nodes;
    const std::size_t n = nodes.size();
    p_.banned.assign(n, 0);
    p_.network.reserve(2 + 2 * n, 4 * n);
    while (p_.network.num_vertices() < static_cast<int>(2 + 2 * n)) p_.network.add_vertex();

    for (std::size_t i = 0; i < n; ++i) {
      const PNode& node = nodes[i];
      if (node.kind == PKind::Output) continue;
      if (p_.info.required_bw[i]) {
        if (!p_.info.tangents_closure[i]) {
          p_.network.add_edge(out_vertex(i), FlowNetwork::kSink,
                              FlowNetwork::kInfinite);  // input required for gradient
        } else {
          p_.network.add_edge(in_vertex(i), FlowNetwork::kSink, FlowNetwork::kInfinite);  // computed in the backward
          continue;
        }
      }
      if (node.is_primal) ban(i);
      if (p_.info.required_fw[i] && should_ban_recomputation(i)) ban(i);

      std::int64_t weight;
      if (node.is_sym)
        weight = node.size;  // sym_node_size
      else if (!node.is_tensor)
        weight = FlowNetwork::kInfinite;  // a tuple cannot be saved
      else
        weight = node_weight(i);
      p_.network.add_edge(in_vertex(i), out_vertex(i), weight);
      for (int u : node.users)
        if (u != p_.view.output)
          p_.network.add_edge(out_vertex(i), in_vertex(static_cast<std::size_t>(u)), FlowNetwork::kInfinite);
    }
    if (options_.ban_recompute_used_far_apart) ban_used_far_apart();
    if (options_.ban_recompute_long_fusible_chains) ban_long_fusible_chains();
  }

 private:
  const PNode& node(std::size_t i) const { return p_.view.nodes[i]; }
  const PNode& node(int i) const { return p_.view.nodes[static_cast<std::size_t>(i)]; }
  bool required_fw(int i) const { return p_.info.required_fw[static_cast<std::size_t>(i)]; }
  int fw_order(int i) const { return p_.info.fw_order[static_cast<std::size_t>(i)]; }
  bool is_view(std::size_t i) const { return classes_[i].view; }

  bool is_fusible(std::size_t a, std::size_t b) const {
    if (classes_[b].cat) return true;  // memory fusion into a cat
    return classes_[a].fusible && classes_[b].fusible;
  }

  bool is_materialized_backwards(std::size_t i) const {
    if (is_view(i)) return false;
    std::vector<std::size_t> work{i};
    std::unordered_set<std::size_t> seen{i};
    while (!work.empty()) {
      std::size_t cur = work.back();
      work.pop_back();
      for (int u : node(cur).users) {
        const auto user = static_cast<std::size_t>(u);
        if (!required_fw(u) && !is_fusible(cur, user)) return true;
        if (is_view(user) && seen.insert(user).second) work.push_back(user);
      }
    }
    return false;
  }

  bool should_ban_recomputation(std::size_t i) const {
    const PNode& p = node(i);
    if (p.kind != PKind::Call && p.kind != PKind::Tuple) return false;  // call_function only; getitem never
    if (options_.recompute_views && is_view(i)) return false;
    if (p.packet == "aten::lift_fresh_copy" || p.packet == "aten::lift_fresh") return false;
    if (options_.ban_recompute_not_in_allowlist) {
      if (!classes_[i].recomputable) return true;
    } else {
      if (classes_[i].random) return true;
      if (classes_[i].compute_intensive) return true;
    }
    if (options_.ban_recompute_materialized_backward && is_materialized_backwards(i)) return true;
    const std::int64_t dist = p_.dist_from_bw[i];
    if (dist < 1000 && dist > options_.max_dist_from_bw) return true;
    if (options_.ban_recompute_reductions) {
      std::int64_t input_size = 0;
      for (int a : p.positional_tensor_args) input_size += node(a).size;
      if (p.size * 4 < input_size) return true;
    }
    return false;
  }

  bool is_materialized(std::size_t i) const {
    if (node(i).kind == PKind::Placeholder) return true;
    for (int u : node(i).users)
      if (!is_fusible(i, static_cast<std::size_t>(u))) return true;
    return false;
  }

  std::int64_t node_weight(std::size_t i) const {
    if (options_.recompute_views && is_view(i)) return FlowNetwork::kInfinite;  // views are never saved
    const std::int64_t dist = p_.dist_from_bw[i];
    const int exponent = static_cast<int>(std::max<std::int64_t>(std::min<std::int64_t>(dist, 100), 1));
    // Bias towards saving nodes close to the backward (PyTorch: int(mem_sz * 1.1 ** dist)).
    auto mem = static_cast<std::int64_t>(static_cast<double>(node(i).size) * std::pow(1.1, exponent));
    return is_materialized(i) ? mem : mem * 2;
  }

  bool ban(std::size_t i) {
    if (is_view(i)) return false;
    if (node(i).value && node(i).value->type() == ValueType::Float) return false;  // SymFloat
    if (!p_.banned[i]) {
      p_.banned[i] = 1;
      p_.banned_order.push_back(static_cast<int>(i));
    }
    p_.network.add_edge(FlowNetwork::kSource, in_vertex(i), FlowNetwork::kInfinite);
    return true;
  }

  // If a node is used by a fusible op near it and by one far downstream (past an unfusible op),
  // recomputing both users is unlikely to fuse: the far user is banned.
  int find_first_unfusible(const std::vector<int>& start, int max_range) const {
    struct Entry {
      int order;
      bool fusible;
      int node;
      bool operator>(const Entry& o) const { return std::tie(order, fusible) > std::tie(o.order, o.fusible); }
    };
    std::priority_queue<Entry, std::vector<Entry>, std::greater<>> heap;
    for (int s : start) heap.push({fw_order(s), true, s});
    std::unordered_set<int> expanded;
    while (!heap.empty()) {
      Entry e = heap.top();
      heap.pop();
      if (!e.fusible) return e.order;
      if (!expanded.insert(e.node).second) continue;
      for (int u : node(e.node).users) {
        if (!required_fw(u) || fw_order(u) > max_range) continue;
        heap.push({fw_order(u), is_fusible(static_cast<std::size_t>(e.node), static_cast<std::size_t>(u)), u});
      }
    }
    return max_range;
  }

  void ban_used_far_apart() {
    for (int used : p_.info.required_fw_nodes) {
      std::vector<int> fw_users;
      int max_order = -1;
      for (int u : node(used).users)
        if (required_fw(u)) {
          fw_users.push_back(u);
          max_order = std::max(max_order, fw_order(u));
        }
      if (fw_users.empty()) continue;
      const int first_unfusible_use = find_first_unfusible(fw_users, max_order);
      for (int u : node(used).users) {
        if (required_fw(u) && fw_order(u) > first_unfusible_use &&
            is_fusible(static_cast<std::size_t>(used), static_cast<std::size_t>(u))) {
          if (p_.banned[static_cast<std::size_t>(u)]) continue;
          ban(static_cast<std::size_t>(u));
        }
      }
    }
  }

  // A long chain of fusible ops (e.g. a residual stream) is cut every ~100 ops.
  void ban_long_fusible_chains() {
    const std::size_t n = p_.view.nodes.size();
    std::vector<char> visited(n, 0);
    using Entry = std::pair<int, int>;  // (fw order, node)
    for (std::size_t start = 0; start < n; ++start) {
      if (!required_fw(static_cast<int>(start))) continue;
      const int start_order = fw_order(static_cast<int>(start));
      std::priority_queue<Entry, std::vector<Entry>, std::greater<>> heap;
      heap.push({start_order, static_cast<int>(start)});
      while (!heap.empty()) {
        const int cur = heap.top().second;
        heap.pop();
        if (visited[static_cast<std::size_t>(cur)]) continue;
        visited[static_cast<std::size_t>(cur)] = 1;
        if (fw_order(cur) > start_order + 100 && heap.empty()) {
          ban(static_cast<std::size_t>(cur));
          break;
        }
        for (int u : node(cur).users)
          if (required_fw(u) && is_fusible(static_cast<std::size_t>(cur), static_cast<std::size_t>(u)) &&
              !p_.banned[static_cast<std::size_t>(u)])
            heap.push({fw_order(u), u});
      }
    }
  }

  Problem& p_;
  const MinCutOptions& options_;
  std::optional<OpTypes> changed_ops_;
  const OpTypes& ops_;
  struct Classes {
    bool fusible, view, recomputable, random, compute_intensive, cat;
  };
  std::vector<Classes> classes_;  // per node of the view
};

std::unique_ptr<Problem> make_problem(const JointGraph& joint, const MinCutOptions& options) {
  auto p = std::make_unique<Problem>();
  if (options.cse) {
    p->changed = eliminate_common_subexpressions_if_any(joint.graph);
  } else {
    p->changed = joint.graph;
    if (eliminate_dead_code(*p->changed) == 0) p->changed.reset();
  }
  p->graph = p->changed ? &*p->changed : &joint.graph;
  p->view = detail::build_joint_view(*p->graph, joint.num_primals, joint.num_fwd_outputs);
  p->info = detail::classify_nodes(p->view);
  return p;
}

void compute_dist_from_bw(Problem& p) {
  const auto& nodes = p.view.nodes;
  p.dist_from_bw.assign(nodes.size(), 0);
  for (std::size_t i = nodes.size(); i-- > 0;) {
    if (nodes[i].kind == PKind::Output) {
      p.dist_from_bw[i] = kFar;
    } else if (!p.info.required_fw[i]) {
      p.dist_from_bw[i] = 0;
    } else {
      std::int64_t d = kFar;
      for (int u : nodes[i].users) d = std::min(d, p.dist_from_bw[static_cast<std::size_t>(u)] + 1);
      p.dist_from_bw[i] = d;
    }
  }
}

std::string vertex_name(const JointView& view, int v) {
  if (v == FlowNetwork::kSource) return "source";
  if (v == FlowNetwork::kSink) return "sink";
  const auto i = static_cast<std::size_t>((v - 2) / 2);
  return detail::display_name(view.nodes[i]) + ((v - 2) % 2 == 0 ? "_in" : "_out");
}

// Why no finite cut exists: a source-sink path of infinite edges, by name.
std::string infinite_path(const Problem& p) {
  const auto& edges = p.network.edges();
  std::vector<std::vector<int>> adj(static_cast<std::size_t>(p.network.num_vertices()));
  for (const auto& e : edges)
    if (e.capacity == FlowNetwork::kInfinite) adj[static_cast<std::size_t>(e.from)].push_back(e.to);
  std::vector<int> parent(adj.size(), -2);
  std::vector<int> queue{FlowNetwork::kSource};
  parent[FlowNetwork::kSource] = -1;
  for (std::size_t q = 0; q < queue.size(); ++q)
    for (int v : adj[static_cast<std::size_t>(queue[q])])
      if (parent[static_cast<std::size_t>(v)] == -2) {
        parent[static_cast<std::size_t>(v)] = queue[q];
        queue.push_back(v);
      }
  if (parent[FlowNetwork::kSink] == -2) return "(no infinite path found)";
  std::vector<std::string> names;
  for (int v = FlowNetwork::kSink; v != -1; v = parent[static_cast<std::size_t>(v)])
    names.push_back(vertex_name(p.view, v));
  std::reverse(names.begin(), names.end());
  return fmt::format("{}", fmt::join(names, " -> "));
}

}  // namespace

PartitionResult min_cut_rematerialization_partition(const JointGraph& joint, const MinCutOptions& options) {
  std::unique_ptr<Problem> p = make_problem(joint, options);
  if (p->info.num_required_bw == 0) {
    // Nothing depends on the tangents: nothing to partition.
    JointGraph cleaned{*p->graph, joint.num_primals, joint.num_fwd_outputs};
    return default_partition(cleaned);
  }
  compute_dist_from_bw(*p);
  NetworkBuilder(*p, options).build();

  MinCut cut;
  try {
    cut = minimum_cut(p->network, options.algorithm);
  } catch (const UnboundedFlowError&) {
    throw PartitionError(fmt::format(
        "min_cut_rematerialization_partition: a value is required by the backward but can be neither saved nor "
        "recomputed; path of infinite edges: {}",
        infinite_path(*p)));
  }
  std::vector<int> cut_nodes;
  for (std::size_t e : cut.cut_edges) {
    const auto& edge = p->network.edges()[e];
    if (edge.from < 2 || edge.to != edge.from + 1 || (edge.from - 2) % 2 != 0)
      throw PartitionError(
          fmt::format("min_cut_rematerialization_partition: cut edge {} -> {} is not a node's own edge",
                      vertex_name(p->view, edge.from), vertex_name(p->view, edge.to)));
    cut_nodes.push_back((edge.from - 2) / 2);
  }
  std::sort(cut_nodes.begin(), cut_nodes.end());
  std::vector<Value*> saved;
  saved.reserve(cut_nodes.size());
  for (int i : cut_nodes) saved.push_back(p->view.nodes[static_cast<std::size_t>(i)].value);
  return detail::assemble_partition(*p->graph, p->view, std::move(saved), /*autograd_order=*/true,
                                    options.reorder_for_peak_memory);
}

std::string min_cut_identity(const MinCutOptions& o) {
  // Every option, so that two configurations never share a cache entry.
  std::string text = fmt::format(
      "aotpipe.min_cut/2 ban_far_apart={} ban_long_chains={} ban_materialized_bw={} ban_not_in_allowlist={} "
      "ban_reductions={} recompute_views={} cse={} reorder_for_peak_memory={} max_dist_from_bw={} algorithm={} "
      "extra=[{}]",
      o.ban_recompute_used_far_apart, o.ban_recompute_long_fusible_chains, o.ban_recompute_materialized_backward,
      o.ban_recompute_not_in_allowlist, o.ban_recompute_reductions, o.recompute_views, o.cse, o.reorder_for_peak_memory,
      o.max_dist_from_bw, to_string(o.algorithm), fmt::join(o.extra_recomputable_ops, ","));
  if (o.recomputable_ops) text += fmt::format(" recomputable=[{}]", fmt::join(*o.recomputable_ops, ","));
  return text;
}

Partitioner min_cut_rematerialization_partition(MinCutOptions options) {
  std::string identity = min_cut_identity(options);
  return named_partitioner(std::move(identity), [options = std::move(options)](const JointGraph& joint) {
    return min_cut_rematerialization_partition(joint, options);
  });
}

MinCutProblem build_min_cut_problem(const JointGraph& joint, const MinCutOptions& options) {
  std::unique_ptr<Problem> p = make_problem(joint, options);
  MinCutProblem out;
  if (p->info.num_required_bw > 0) {
    compute_dist_from_bw(*p);
    NetworkBuilder(*p, options).build();
  }
  for (int v = 0; v < p->network.num_vertices(); ++v) out.vertex_names.push_back(vertex_name(p->view, v));
  for (std::size_t i = 0; i < p->banned.size(); ++i)
    if (p->banned[i]) out.banned.push_back(detail::display_name(p->view.nodes[i]));
  out.network = std::move(p->network);
  if (p->changed)
    out.graph = std::move(*p->changed);  // a conditional expression of a const and a moved Graph would copy
  else
    out.graph = *p->graph;
  return out;
}

}  // namespace aotpipe::partitioners
