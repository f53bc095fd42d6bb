#pragma once
// The flow network of the min-cut partitioner and its minimum s-t cut, solved with one of
// Boost.Graph's max-flow algorithms (see docs/stages/partition.md for the measured choice).
#include <boost/unordered/unordered_flat_map.hpp>

#include <cstdint>
#include <string_view>
#include <utility>
#include <vector>

namespace aotpipe::partitioners {

enum class MaxFlowAlgorithm : std::uint8_t {
  BoykovKolmogorov,  // boost::boykov_kolmogorov_max_flow
  PushRelabel,       // boost::push_relabel_max_flow
  EdmondsKarp,       // boost::edmonds_karp_max_flow
};
std::string_view to_string(MaxFlowAlgorithm algorithm);
// The algorithm min_cut_rematerialization_partition uses unless told otherwise: the fastest
// on the 10,000-node benchmark (bench/stages/partition_bench.cpp).
inline constexpr MaxFlowAlgorithm kDefaultMaxFlowAlgorithm = MaxFlowAlgorithm::BoykovKolmogorov;

// A directed graph with capacities, as networkx.DiGraph is used by PyTorch: adding an edge
// that exists replaces its capacity. Vertex 0 is the source, vertex 1 the sink.
class FlowNetwork {
 public:
  static constexpr int kSource = 0;
  static constexpr int kSink = 1;
  static constexpr std::int64_t kInfinite = -1;  // capacity of an edge that may never be cut

  FlowNetwork() = default;
  int add_vertex() { return num_vertices_++; }
  int num_vertices() const { return num_vertices_; }
  std::size_t num_edges() const { return edges_.size(); }
  // capacity >= 0, or kInfinite.
  void add_edge(int from, int to, std::int64_t capacity);
  void reserve(std::size_t vertices, std::size_t edges);

  struct Edge {
    int from;
    int to;
    std::int64_t capacity;
  };
  const std::vector<Edge>& edges() const { return edges_; }

 private:
  int num_vertices_ = 2;  // the source (0) and the sink (1)
  std::vector<Edge> edges_;
  // (from << 32 | to) -> edge index; open addressing, so an edge costs no allocation of its own.
  boost::unordered_flat_map<std::uint64_t, std::size_t> index_;
};

struct MinCut {
  std::int64_t value = 0;              // sum of the capacities of the cut edges
  std::vector<bool> sink_side;         // per vertex: on the sink's side of the cut
  std::vector<std::size_t> cut_edges;  // indices into FlowNetwork::edges(), in edge order
};

// Thrown when every source-sink cut contains an infinite edge.
class UnboundedFlowError : public std::exception {
 public:
  const char* what() const noexcept override { return "the flow network has no finite cut"; }
};

// The minimum cut whose sink side is smallest: the sink side is the set of vertices that can
// still reach the sink in the residual network of a maximum flow (what networkx's
// minimum_cut returns), so every algorithm gives the same cut.
MinCut minimum_cut(const FlowNetwork& network, MaxFlowAlgorithm algorithm = kDefaultMaxFlowAlgorithm);

}  // namespace aotpipe::partitioners
