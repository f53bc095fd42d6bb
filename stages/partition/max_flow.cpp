#include <aotpipe/stages/partition/max_flow.h>

// GCC 12 reports a false -Wmaybe-uninitialized inside Boost.Graph's edge iterators when the
// max-flow templates are inlined here.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <boost/graph/compressed_sparse_row_graph.hpp>
#include <boost/property_map/property_map.hpp>
#include <boost/graph/boykov_kolmogorov_max_flow.hpp>
#include <boost/graph/edmonds_karp_max_flow.hpp>
#include <boost/graph/push_relabel_max_flow.hpp>

#include <limits>
#include <stdexcept>
#include <string>

namespace aotpipe::partitioners {

std::string_view to_string(MaxFlowAlgorithm algorithm) {
  switch (algorithm) {
    case MaxFlowAlgorithm::BoykovKolmogorov: return "boykov_kolmogorov";
    case MaxFlowAlgorithm::PushRelabel: return "push_relabel";
    case MaxFlowAlgorithm::EdmondsKarp: return "edmonds_karp";
  }
  return "?";
}

void FlowNetwork::reserve(std::size_t /*vertices*/, std::size_t edges) {
  edges_.reserve(edges);
  index_.reserve(edges);
}

void FlowNetwork::add_edge(int from, int to, std::int64_t capacity) {
  if (from < 0 || to < 0 || from >= num_vertices_ || to >= num_vertices_ || from == to)
    throw std::invalid_argument("FlowNetwork::add_edge: bad vertex");
  if (capacity < 0 && capacity != kInfinite) throw std::invalid_argument("FlowNetwork::add_edge: negative capacity");
  const std::uint64_t key = (static_cast<std::uint64_t>(from) << 32) | static_cast<std::uint32_t>(to);
  auto [it, inserted] = index_.try_emplace(key, edges_.size());
  if (!inserted) {  // networkx.DiGraph.add_edge on an existing edge: the new capacity wins
    edges_[it->second].capacity = capacity;
    return;
  }
  edges_.push_back({from, to, capacity});
}

namespace {

// The residual network as one compressed sparse row graph: every arc and its property slots
// live in a few flat arrays (an adjacency_list allocates each edge's properties separately,
// which was most of a small partition's max-flow time).
using CsrGraph = boost::compressed_sparse_row_graph<boost::directedS, boost::no_property, boost::no_property,
                                                    boost::no_property, std::size_t, std::size_t>;
using EdgeDesc = boost::graph_traits<CsrGraph>::edge_descriptor;

}  // namespace

MinCut minimum_cut(const FlowNetwork& network, MaxFlowAlgorithm algorithm) {
  const auto& edges = network.edges();
  const auto n = static_cast<std::size_t>(network.num_vertices());

  // Infinite capacity: more than every finite edge together, so that a cut containing an
  // infinite edge is never minimal while a finite cut exists (networkx does the same).
  std::int64_t finite_total = 0;
  std::size_t num_infinite = 0;
  for (const auto& e : edges) {
    if (e.capacity == FlowNetwork::kInfinite) {
      ++num_infinite;
    } else {
      if (finite_total > std::numeric_limits<std::int64_t>::max() / 4 - e.capacity)
        throw std::overflow_error("min cut: the finite capacities overflow 64 bits");
      finite_total += e.capacity;
    }
  }
  const std::int64_t infinite = finite_total + 1;
  // Every excess in the network comes through the infinite edges: keep their sum in range.
  constexpr std::int64_t kHalfRange = std::numeric_limits<std::int64_t>::max() / 2;
  if (num_infinite > 0 && static_cast<long double>(infinite) * static_cast<long double>(num_infinite + 1) >
                              static_cast<long double>(kHalfRange))
    throw std::overflow_error("min cut: capacities too large for 64-bit flow arithmetic");

  // Arcs: every edge and its reverse, grouped by source (a counting sort), so that arc k is
  // the CSR graph's edge k.
  std::vector<std::size_t> first_out(n + 1, 0);
  for (const auto& e : edges) {
    ++first_out[static_cast<std::size_t>(e.from) + 1];
    ++first_out[static_cast<std::size_t>(e.to) + 1];
  }
  for (std::size_t v = 0; v < n; ++v) first_out[v + 1] += first_out[v];
  const std::size_t num_arcs = first_out[n];
  std::vector<std::pair<std::size_t, std::size_t>> arcs(num_arcs);
  std::vector<std::int64_t> capacity(num_arcs, 0), residual(num_arcs, 0);
  std::vector<std::size_t> reverse_arc(num_arcs);
  {
    std::vector<std::size_t> fill(first_out.begin(), first_out.end() - 1);
    for (const auto& e : edges) {
      const auto u = static_cast<std::size_t>(e.from), v = static_cast<std::size_t>(e.to);
      const std::size_t fwd = fill[u]++, rev = fill[v]++;
      arcs[fwd] = {u, v};
      arcs[rev] = {v, u};
      capacity[fwd] = e.capacity == FlowNetwork::kInfinite ? infinite : e.capacity;
      reverse_arc[fwd] = rev;
      reverse_arc[rev] = fwd;
    }
  }
  const CsrGraph g(boost::edges_are_sorted, arcs.begin(), arcs.end(), n);
  std::vector<EdgeDesc> arc_desc(num_arcs);
  for (auto [e, end] = boost::edges(g); e != end; ++e) {
    // Sorted input keeps its order: CSR edge k is arc k (what the property arrays assume).
    if (e->idx >= num_arcs || boost::source(*e, g) != arcs[e->idx].first || boost::target(*e, g) != arcs[e->idx].second)
      throw std::logic_error("min cut: the CSR graph reordered the arcs");
    arc_desc[e->idx] = *e;
  }
  std::vector<EdgeDesc> reverse(num_arcs);
  for (std::size_t k = 0; k < num_arcs; ++k) reverse[k] = arc_desc[reverse_arc[k]];

  const auto edge_index = boost::get(boost::edge_index, g);
  const auto vertex_index = boost::get(boost::vertex_index, g);
  auto capacity_map = boost::make_iterator_property_map(capacity.begin(), edge_index);
  auto residual_map = boost::make_iterator_property_map(residual.begin(), edge_index);
  auto reverse_map = boost::make_iterator_property_map(reverse.begin(), edge_index);
  std::vector<EdgeDesc> predecessor(n);
  std::vector<boost::default_color_type> color(n);
  std::vector<long> distance(n);
  auto predecessor_map = boost::make_iterator_property_map(predecessor.begin(), vertex_index);
  auto color_map = boost::make_iterator_property_map(color.begin(), vertex_index);
  auto distance_map = boost::make_iterator_property_map(distance.begin(), vertex_index);

  const auto s = static_cast<std::size_t>(FlowNetwork::kSource);
  const auto t = static_cast<std::size_t>(FlowNetwork::kSink);
  std::int64_t flow = 0;
  switch (algorithm) {
    case MaxFlowAlgorithm::BoykovKolmogorov:
      flow = boost::boykov_kolmogorov_max_flow(g, capacity_map, residual_map, reverse_map, predecessor_map, color_map,
                                               distance_map, vertex_index, s, t);
      break;
    case MaxFlowAlgorithm::PushRelabel:
      flow = boost::push_relabel_max_flow(g, s, t, capacity_map, residual_map, reverse_map, vertex_index);
      break;
    case MaxFlowAlgorithm::EdmondsKarp:
      flow = boost::edmonds_karp_max_flow(g, s, t, capacity_map, residual_map, reverse_map, color_map, predecessor_map);
      break;
  }
  if (flow >= infinite) throw UnboundedFlowError();

  // The sink side: vertices from which the sink is reachable through arcs with residual
  // capacity (a backward search from the sink). The residual in-arcs of each vertex, as one
  // array (CSR): sources of v are residual_from[first_in[v] .. first_in[v + 1]).
  std::vector<std::size_t> first_in(n + 1, 0);
  for (std::size_t k = 0; k < num_arcs; ++k)
    if (residual[k] > 0) ++first_in[arcs[k].second + 1];
  for (std::size_t v = 0; v < n; ++v) first_in[v + 1] += first_in[v];
  std::vector<std::size_t> residual_from(first_in[n]);
  {
    std::vector<std::size_t> fill(first_in.begin(), first_in.end() - 1);
    for (std::size_t k = 0; k < num_arcs; ++k)
      if (residual[k] > 0) residual_from[fill[arcs[k].second]++] = arcs[k].first;
  }
  MinCut cut;
  cut.value = flow;
  cut.sink_side.assign(n, false);
  std::vector<std::size_t> work{t};
  cut.sink_side[t] = true;
  while (!work.empty()) {
    std::size_t v = work.back();
    work.pop_back();
    for (std::size_t k = first_in[v]; k < first_in[v + 1]; ++k) {
      const std::size_t u = residual_from[k];
      if (cut.sink_side[u]) continue;
      cut.sink_side[u] = true;
      work.push_back(u);
    }
  }
  if (cut.sink_side[static_cast<std::size_t>(FlowNetwork::kSource)])
    throw std::logic_error("min cut: the source reaches the sink in the residual network (max flow not maximal)");
  for (std::size_t i = 0; i < edges.size(); ++i)
    if (!cut.sink_side[static_cast<std::size_t>(edges[i].from)] && cut.sink_side[static_cast<std::size_t>(edges[i].to)])
      cut.cut_edges.push_back(i);
  return cut;
}

}  // namespace aotpipe::partitioners

#pragma GCC diagnostic pop
