// Ordering a graph for peak memory: the estimate, the LPMF order on hand-written graphs, what
// must keep its order (random calls, mutations), and on random graphs that the new order is
// valid, computes the same results and never estimates higher.
#include <aotpipe/graph/interpreter.h>
#include <aotpipe/graph/memory_schedule.h>
#include <aotpipe/graph/parser.h>
#include <aotpipe/graph/verifier.h>

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "test_support.h"

namespace aotpipe {
namespace {

constexpr std::size_t kBig = 64 * 64 * 4;  // f32[64, 64]
constexpr std::size_t kRow = 64 * 4;       // f32[64]

std::vector<std::string> order_of(const Graph& g) {
  std::vector<std::string> names;
  for (const Node* n : g.nodes()) names.push_back(n->num_outputs() ? n->output()->name() : n->label());
  return names;
}

using Names = std::vector<std::string>;

TEST(MemorySchedule, EstimateCountsTemporariesOutputsAndFreedInputs) {
  Graph g = parse_graph(R"(
graph chain(%x: f32[64, 64], %y: f32[64, 64]):
  %a: f32[64, 64] = aten::exp(%x)
  %b: f32[64, 64] = aten::exp(%y)
  %sa: f32[64] = aten::sum.dim_IntList(%a, [1])
  %sb: f32[64] = aten::sum.dim_IntList(%b, [1])
  return (%sa, %sb)
)");
  // %a and %b alive together, then %sa while %a is still read.
  EXPECT_EQ(estimate_peak_bytes(g, InputLifetime::HeldByCaller), 2 * kBig + kRow);
  // The inputs too, until %a and %b have read them: %x is freed after %a, before %sa.
  EXPECT_EQ(estimate_peak_bytes(g, InputLifetime::FreedAfterLastUse), 3 * kBig);
}

TEST(MemorySchedule, LpmfFinishesOneBranchBeforeStartingTheNext) {
  const std::string text = R"(
graph branches(%x: f32[64, 64], %y: f32[64, 64]):
  %a: f32[64, 64] = aten::exp(%x)
  %b: f32[64, 64] = aten::exp(%y)
  %sa: f32[64] = aten::sum.dim_IntList(%a, [1])
  %sb: f32[64] = aten::sum.dim_IntList(%b, [1])
  return (%sa, %sb)
)";
  Graph g = parse_graph(text);
  const MemorySchedule s = schedule_for_peak_memory(g, InputLifetime::HeldByCaller);
  EXPECT_EQ(s.method, ScheduleMethod::LeastPeakMemoryFirst);
  EXPECT_EQ(s.peak_before, 2 * kBig + kRow);
  EXPECT_EQ(s.peak_after, kBig + 2 * kRow);
  EXPECT_EQ(order_of(g), (Names{"a", "sa", "b", "sb"}));
  EXPECT_EQ(estimate_peak_bytes(g, InputLifetime::HeldByCaller), s.peak_after);
  verify(g);

  const Graph original = parse_graph(text);
  const auto inputs = testing::make_inputs(original, 1);
  const auto expected = Interpreter(original).run(inputs);
  const auto actual = Interpreter(g).run(inputs);
  ASSERT_EQ(actual.size(), expected.size());
  for (std::size_t i = 0; i < expected.size(); ++i) EXPECT_TRUE(at::equal(expected[i], actual[i])) << i;
}

// A placeholder gradient (one zero, expanded) is returned and frees nothing: made early it would
// be alive through every later peak, so it goes last.
TEST(MemorySchedule, CallsMakingOnlyOutputsGoLast) {
  Graph g = parse_graph(R"(
graph branches(%x: f32[64, 64], %y: f32[64, 64]):
  %z: f32[] = aten::zeros([], dtype=torch.float32, layout=torch.strided, device=device("cpu"))
  %e: f32[64] stride=[0] = aten::expand(%z, [64])
  %a: f32[64, 64] = aten::exp(%x)
  %b: f32[64, 64] = aten::exp(%y)
  %sa: f32[64] = aten::sum.dim_IntList(%a, [1])
  %sb: f32[64] = aten::sum.dim_IntList(%b, [1])
  return (%sa, %e, %sb)
)");
  const MemorySchedule s = schedule_for_peak_memory(g, InputLifetime::HeldByCaller);
  EXPECT_EQ(s.method, ScheduleMethod::LeastPeakMemoryFirst);
  EXPECT_EQ(order_of(g), (Names{"a", "sa", "b", "sb", "z", "e"}));
  EXPECT_EQ(s.peak_after, kBig + 2 * kRow);  // %z comes after %b is freed
}

TEST(MemorySchedule, AGraphAlreadyInItsBestOrderIsKept) {
  Graph g = parse_graph(R"(
graph chain(%x: f32[64, 64]):
  %a: f32[64, 64] = aten::exp(%x)
  %b: f32[64, 64] = aten::sin(%a)
  %c: f32[64] = aten::sum.dim_IntList(%b, [1])
  return (%c)
)");
  const Names before = order_of(g);
  const MemorySchedule s = schedule_for_peak_memory(g, InputLifetime::FreedAfterLastUse);
  EXPECT_EQ(s.method, ScheduleMethod::Kept);
  EXPECT_EQ(s.peak_after, s.peak_before);
  EXPECT_EQ(order_of(g), before);
}

// The same graph with exp and with rand_like: LPMF starts with the smaller branch, unless both
// branches draw random numbers, whose draws must stay in their order.
TEST(MemorySchedule, RandomCallsKeepTheirOrder) {
  const std::string text = R"(
graph branches(%x: f32[64, 64], %y: f32[32, 64]):
  %a: f32[64, 64] = aten::OP(%x)
  %b: f32[32, 64] = aten::OP(%y)
  %sa: f32[64] = aten::sum.dim_IntList(%a, [1])
  %sb: f32[32] = aten::sum.dim_IntList(%b, [1])
  return (%sa, %sb)
)";
  auto with_op = [&](const std::string& op) {
    std::string t = text;
    for (std::size_t at = t.find("OP"); at != std::string::npos; at = t.find("OP")) t.replace(at, 2, op);
    return parse_graph(t);
  };
  Graph pointwise = with_op("exp");
  EXPECT_EQ(schedule_for_peak_memory(pointwise, InputLifetime::HeldByCaller).method,
            ScheduleMethod::LeastPeakMemoryFirst);
  EXPECT_EQ(order_of(pointwise), (Names{"b", "sb", "a", "sa"}));

  Graph random = with_op("rand_like");
  const MemorySchedule s = schedule_for_peak_memory(random, InputLifetime::HeldByCaller);
  EXPECT_EQ(s.method, ScheduleMethod::LeastPeakMemoryFirst);
  EXPECT_LT(s.peak_after, s.peak_before);
  EXPECT_EQ(order_of(random), (Names{"a", "sa", "b", "sb"}));

  const Graph original = with_op("rand_like");
  const auto inputs = testing::make_inputs(original, 2);
  at::manual_seed(7);
  const auto expected = Interpreter(original).run(inputs);
  at::manual_seed(7);
  const auto actual = Interpreter(random).run(inputs);
  for (std::size_t i = 0; i < expected.size(); ++i) EXPECT_TRUE(at::equal(expected[i], actual[i])) << i;
}

TEST(MemorySchedule, AGraphThatMutatesKeepsItsOrder) {
  Graph g = parse_graph(R"(
graph branches(%x: f32[64, 64], %y: f32[64, 64]):
  %a: f32[64, 64] = aten::exp(%x)
  %b: f32[64, 64] = aten::exp(%y)
  %sa: f32[64] = aten::sum.dim_IntList(%a, [1])
  %sb: f32[64] = aten::sum.dim_IntList(%b, [1])
  %x2: f32[64, 64] = aten::add_.Tensor(%x, 1)
  return (%sa, %sb)
)");
  const Names before = order_of(g);
  const MemorySchedule s = schedule_for_peak_memory(g, InputLifetime::HeldByCaller);
  EXPECT_EQ(s.method, ScheduleMethod::Kept);
  EXPECT_EQ(order_of(g), before);
}

TEST(MemorySchedule, ReorderNodesRefusesAnOrderThatReadsBeforeItDefines) {
  Graph g = parse_graph(R"(
graph chain(%x: f32[4]):
  %a: f32[4] = aten::exp(%x)
  %b: f32[4] = aten::sin(%a)
  return (%b)
)");
  std::vector<Node*> swapped{g.nodes()[1], g.nodes()[0]};
  EXPECT_THROW(g.reorder_nodes(swapped), GraphError);
  std::vector<Node*> repeated{g.nodes()[0], g.nodes()[0]};
  EXPECT_THROW(g.reorder_nodes(repeated), GraphError);
  EXPECT_EQ(order_of(g), (Names{"a", "b"}));
}

// Random graphs (views, multi-output and list ops): the new order verifies, gives the same
// results bit for bit, and its estimate is the one reported and never above the old one.
TEST(MemorySchedule, RandomGraphsKeepTheirResults) {
  std::size_t reordered = 0;
  for (uint64_t seed = 0; seed < 200; ++seed) {
    for (InputLifetime lifetime : {InputLifetime::HeldByCaller, InputLifetime::FreedAfterLastUse}) {
      const Graph original = testing::random_graph(seed, 40);
      Graph g = original;
      const MemorySchedule s = schedule_for_peak_memory(g, lifetime);
      ASSERT_LE(s.peak_after, s.peak_before) << "seed " << seed;
      EXPECT_EQ(estimate_peak_bytes(g, lifetime), s.peak_after) << "seed " << seed;
      if (s.method == ScheduleMethod::Kept) {
        EXPECT_EQ(order_of(g), order_of(original)) << "seed " << seed;
        continue;
      }
      ++reordered;
      ASSERT_NO_THROW(verify(g, {.allow_dead_code = true})) << "seed " << seed;
      const auto inputs = testing::make_inputs(original, seed);
      at::manual_seed(static_cast<int64_t>(seed));
      const auto expected = Interpreter(original).run(inputs);
      at::manual_seed(static_cast<int64_t>(seed));
      const auto actual = Interpreter(g).run(inputs);
      ASSERT_EQ(actual.size(), expected.size());
      for (std::size_t i = 0; i < expected.size(); ++i)
        EXPECT_TRUE(testing::tensors_close(expected[i], actual[i], 0, 0)) << "seed " << seed << " output " << i;
    }
  }
  EXPECT_GT(reordered, 40u);  // the generator makes graphs whose order matters
}

}  // namespace
}  // namespace aotpipe
