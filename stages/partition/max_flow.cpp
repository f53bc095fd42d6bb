#include <aotpipe/stages/partition/max_flow.h>

// GCC 12 reports a false -Wmaybe-uninitialized inside Boost.Graph's edge iterators when the
// max-flow templates are inlined here.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <boost/graph/adjacency_list.hpp>
#include <boost/graph/boykov_kolmogorov_max_flow.hpp>
#include <boost/graph/edmonds_karp_max_flow.hpp>
#include <boost/graph/push_relabel_max_flow.hpp>

#include <iterator>
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

using Traits = boost::adjacency_list_traits<boost::vecS, boost::vecS, boost::directedS>;
using BoostGraph = boost::adjacency_list<
    boost::vecS, boost::vecS, boost::directedS,
    boost::property<boost::vertex_color_t, boost::default_color_type,
                    boost::property<boost::vertex_distance_t, long,
                                    boost::property<boost::vertex_predecessor_t, Traits::edge_descriptor>>>,
    boost::property<boost::edge_capacity_t, std::int64_t,
                    boost::property<boost::edge_residual_capacity_t, std::int64_t,
                                    boost::property<boost::edge_reverse_t, Traits::edge_descriptor>>>>;
using EdgeDesc = Traits::edge_descriptor;

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
  if (num_infinite > 0 && static_cast<long double>(infinite) * static_cast<long double>(num_infinite + 1) >
                              static_cast<long double>(std::numeric_limits<std::int64_t>::max() / 2))
    throw std::overflow_error("min cut: capacities too large for 64-bit flow arithmetic");

  BoostGraph g(n);
  // Add every edge and its reverse first; descriptors are read back afterwards because adding
  // edges may move a vertex's out-edge storage. Each vertex's out-edge list is sized first, so
  // that it is allocated once rather than grown edge by edge.
  std::vector<std::size_t> degree(n, 0);
  for (const auto& e : edges) {
    ++degree[static_cast<std::size_t>(e.from)];
    ++degree[static_cast<std::size_t>(e.to)];
  }
  for (std::size_t v = 0; v < n; ++v) g.out_edge_list(v).reserve(degree[v]);
  std::vector<std::size_t> out_count(n, 0);
  std::vector<std::pair<std::size_t, std::size_t>> slot(edges.size());  // (forward, reverse) out-edge positions
  for (std::size_t i = 0; i < edges.size(); ++i) {
    const auto u = static_cast<std::size_t>(edges[i].from), v = static_cast<std::size_t>(edges[i].to);
    boost::add_edge(u, v, g);
    slot[i].first = out_count[u]++;
    boost::add_edge(v, u, g);
    slot[i].second = out_count[v]++;
  }
  // The k-th out-edge of v (out-edge iterators of a vecS list are random access).
  auto out_edge = [&g](std::size_t v, std::size_t k) { return *std::next(boost::out_edges(v, g).first, k); };
  auto capacity = boost::get(boost::edge_capacity, g);
  auto residual = boost::get(boost::edge_residual_capacity, g);
  auto reverse = boost::get(boost::edge_reverse, g);
  for (std::size_t i = 0; i < edges.size(); ++i) {
    const auto u = static_cast<std::size_t>(edges[i].from), v = static_cast<std::size_t>(edges[i].to);
    EdgeDesc fwd = out_edge(u, slot[i].first);
    EdgeDesc rev = out_edge(v, slot[i].second);
    capacity[fwd] = edges[i].capacity == FlowNetwork::kInfinite ? infinite : edges[i].capacity;
    capacity[rev] = 0;
    reverse[fwd] = rev;
    reverse[rev] = fwd;
  }

  const auto s = boost::vertex(static_cast<std::size_t>(FlowNetwork::kSource), g);
  const auto t = boost::vertex(static_cast<std::size_t>(FlowNetwork::kSink), g);
  std::int64_t flow = 0;
  switch (algorithm) {
    case MaxFlowAlgorithm::BoykovKolmogorov: flow = boost::boykov_kolmogorov_max_flow(g, s, t); break;
    case MaxFlowAlgorithm::PushRelabel: flow = boost::push_relabel_max_flow(g, s, t); break;
    case MaxFlowAlgorithm::EdmondsKarp: flow = boost::edmonds_karp_max_flow(g, s, t); break;
  }
  if (flow >= infinite) throw UnboundedFlowError();

  // The sink side: vertices from which the sink is reachable through edges with residual
  // capacity (a backward search from the sink).
  // The residual in-edges of each vertex, as one array (CSR): sources of v are
  // residual_from[first_in[v] .. first_in[v + 1]).
  std::vector<std::size_t> first_in(n + 1, 0);
  for (auto [e, end] = boost::edges(g); e != end; ++e)
    if (residual[*e] > 0) ++first_in[boost::target(*e, g) + 1];
  for (std::size_t v = 0; v < n; ++v) first_in[v + 1] += first_in[v];
  std::vector<std::size_t> residual_from(first_in[n]);
  std::vector<std::size_t> fill(first_in.begin(), first_in.end() - 1);
  for (auto [e, end] = boost::edges(g); e != end; ++e)
    if (residual[*e] > 0) residual_from[fill[boost::target(*e, g)]++] = boost::source(*e, g);
  MinCut cut;
  cut.value = flow;
  cut.sink_side.assign(n, false);
  std::vector<std::size_t> work{static_cast<std::size_t>(FlowNetwork::kSink)};
  cut.sink_side[static_cast<std::size_t>(FlowNetwork::kSink)] = true;
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
