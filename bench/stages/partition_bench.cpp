// The min-cut partitioner on ~10,000-node joint graphs, for each Boost.Graph max-flow algorithm.
//   BM_MinCutSolve:     minimum_cut() alone on the flow network the partitioner builds (the
//                       part the algorithm choice affects);
//   BM_MinCutPartition: the whole partitioner (CSE, classification, network, cut, graphs);
//   BM_DefaultPartition: default_partition on the same joint, for scale.
// Two joint graphs, traced with trace_joint:
//   ladder: 590 layers of h = tanh(mm(h, w)) + sin(h) * h (pointwise + matmul, a residual
//           stream), ~10,000 nodes;
//   chain:  1,670 layers of x = sin(x) * 1.5 + 0.1 (pointwise only: the long-fusible-chain
//           heuristic bans a node every ~100), ~10,000 nodes.
// Run: build/bench/stages/partition_bench --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
#include <aotpipe/tracer/tracer.h>
#include <aotpipe/stages/partition/default_partition.h>
#include <aotpipe/stages/partition/min_cut_partition.h>

#include <ATen/ATen.h>
#include <benchmark/benchmark.h>

#include <map>
#include <string>

namespace {

using aotpipe::JointGraph;
using aotpipe::TensorList;
using aotpipe::partitioners::MaxFlowAlgorithm;

JointGraph trace(const aotpipe::TraceFunction& fn, const TensorList& inputs) {
  aotpipe::TraceResult r = aotpipe::trace_joint(fn, inputs, {.functionalize = true});
  return JointGraph{std::move(r.graph), inputs.size(), r.num_user_outputs};
}

const JointGraph& joint(int which) {
  static const std::map<int, JointGraph> graphs = [] {
    std::map<int, JointGraph> g;
    g.emplace(0, trace(
                     [](const TensorList& a) {
                       at::Tensor h = a[0];
                       for (int i = 0; i < 590; ++i) {
                         at::Tensor t = at::tanh(at::mm(h, a[1]));
                         h = t + h.sin() * h;
                       }
                       return TensorList{h};
                     },
                     {at::randn({16, 16}).requires_grad_(), at::randn({16, 16}).requires_grad_()}));
    g.emplace(1, trace(
                     [](const TensorList& a) {
                       at::Tensor x = a[0];
                       for (int i = 0; i < 1670; ++i) x = x.sin() * 1.5 + 0.1;
                       return TensorList{x};
                     },
                     {at::randn({64}).requires_grad_()}));
    return g;
  }();
  return graphs.at(which);
}

const char* graph_name(int which) { return which == 0 ? "ladder" : "chain"; }

void BM_MinCutSolve(benchmark::State& state) {
  const auto algorithm = static_cast<MaxFlowAlgorithm>(state.range(0));
  const JointGraph& j = joint(static_cast<int>(state.range(1)));
  aotpipe::partitioners::MinCutProblem problem = aotpipe::partitioners::build_min_cut_problem(j);
  std::int64_t value = 0;
  for (auto _ : state) {
    aotpipe::partitioners::MinCut cut = aotpipe::partitioners::minimum_cut(problem.network, algorithm);
    value = cut.value;
    benchmark::DoNotOptimize(cut.cut_edges.data());
  }
  state.SetLabel(std::string(aotpipe::partitioners::to_string(algorithm)) + "/" +
                 graph_name(static_cast<int>(state.range(1))));
  state.counters["joint_nodes"] = static_cast<double>(j.graph.num_nodes() + j.graph.num_inputs());
  state.counters["vertices"] = problem.network.num_vertices();
  state.counters["edges"] = static_cast<double>(problem.network.num_edges());
  state.counters["cut_value"] = static_cast<double>(value);
}

void BM_MinCutPartition(benchmark::State& state) {
  aotpipe::partitioners::MinCutOptions options;
  options.algorithm = static_cast<MaxFlowAlgorithm>(state.range(0));
  const JointGraph& j = joint(static_cast<int>(state.range(1)));
  aotpipe::Partitioner partition = aotpipe::partitioners::min_cut_rematerialization_partition(options);
  std::size_t saved = 0;
  for (auto _ : state) {
    aotpipe::PartitionResult r = partition(j);
    saved = r.saved_values.size();
    benchmark::DoNotOptimize(r.saved_bytes);
  }
  state.SetLabel(std::string(aotpipe::partitioners::to_string(options.algorithm)) + "/" +
                 graph_name(static_cast<int>(state.range(1))));
  state.counters["saved_values"] = static_cast<double>(saved);
}

void BM_DefaultPartition(benchmark::State& state) {
  const JointGraph& j = joint(static_cast<int>(state.range(0)));
  for (auto _ : state) benchmark::DoNotOptimize(aotpipe::partitioners::default_partition(j).saved_bytes);
  state.SetLabel(graph_name(static_cast<int>(state.range(0))));
}

void algorithms_and_graphs(benchmark::internal::Benchmark* b) {
  b->ArgNames({"algorithm", "graph"});
  for (int graph : {0, 1})
    for (auto algorithm :
         {MaxFlowAlgorithm::BoykovKolmogorov, MaxFlowAlgorithm::PushRelabel, MaxFlowAlgorithm::EdmondsKarp})
      b->Args({static_cast<int64_t>(algorithm), graph});
}

BENCHMARK(BM_MinCutSolve)->Apply(algorithms_and_graphs)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_MinCutPartition)->Apply(algorithms_and_graphs)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_DefaultPartition)->Arg(0)->Arg(1)->ArgName("graph")->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
