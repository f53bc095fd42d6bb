// The memory planner: lifetimes through views, what is not planned, the greedy placement, and
// the checker that every plan (these and the corpus's, tests/models) must pass.
#include <aotpipe/graph/memory_plan.h>
#include <aotpipe/graph/parser.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>

#include "test_support.h"

namespace aotpipe {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

std::map<std::string, PlannedTensor> by_name(const MemoryPlan& plan) {
  std::map<std::string, PlannedTensor> out;
  for (const PlannedTensor& t : plan.tensors) out[t.value->name()] = t;
  return out;
}

// 4x8 floats: 128 bytes, a multiple of the alignment.
constexpr std::size_t kBytes = 128;

TEST(MemoryPlan, AChainReusesMemoryEveryOtherTensor) {
  Graph g = parse_graph(R"(
graph chain(%x: f32[4, 8]):
  %a: f32[4, 8] = aten::relu(%x)
  %b: f32[4, 8] = aten::sin(%a)
  %c: f32[4, 8] = aten::cos(%b)
  %d: f32[4, 8] = aten::exp(%c)
  %e: f32[4, 8] = aten::neg(%d)
  return (%e)
)");
  const MemoryPlan plan = plan_memory(g);
  const auto t = by_name(plan);
  ASSERT_EQ(t.size(), 4u);  // %e is the output
  EXPECT_EQ(t.at("a").first, 0u);
  EXPECT_EQ(t.at("a").last, 1u);
  EXPECT_EQ(t.at("d").last, 4u);
  EXPECT_EQ(plan.peak_live_bytes, 2 * kBytes);
  EXPECT_EQ(plan.arena_bytes, 2 * kBytes);
  EXPECT_EQ(plan.unshared_bytes, 4 * kBytes);
  EXPECT_EQ(plan.escaping, 1u);
  EXPECT_EQ(t.at("a").offset, t.at("c").offset);
  EXPECT_NE(t.at("a").offset, t.at("b").offset);
  EXPECT_EQ(plan_overlap(plan), std::nullopt);
}

TEST(MemoryPlan, AViewKeepsItsBaseAlive) {
  Graph g = parse_graph(R"(
graph views(%x: f32[4, 8]):
  %a: f32[4, 8] = aten::relu(%x)
  %t: f32[8, 4] stride=[1, 8] = aten::t(%a)
  %b: f32[4, 8] = aten::sin(%x)
  %c: f32[4, 8] = aten::cos(%b)
  %u: f32[32] = aten::_unsafe_view(%c, [32])
  %d: f32[8, 4] = aten::mul.Tensor(%t, 2)
  %e: f32[32] = aten::exp(%u)
  %f: f32[8, 4] = aten::add.Tensor(%d, 1)
  return (%f, %e)
)");
  const MemoryPlan plan = plan_memory(g);
  const auto t = by_name(plan);
  // %a lives until %t's last read (node 5); %c until %u's (node 6), though _unsafe_view's schema
  // calls its result fresh.
  EXPECT_EQ(t.at("a").last, 5u);
  EXPECT_EQ(t.at("c").last, 6u);
  EXPECT_EQ(t.count("t"), 0u);
  EXPECT_EQ(t.count("u"), 0u);
  EXPECT_EQ(allocation_of(*g.find_value("t")), g.find_value("a"));
  EXPECT_EQ(allocation_of(*g.find_value("u")), g.find_value("c"));
  EXPECT_EQ(allocation_of(*g.find_value("x")), nullptr);
  EXPECT_NE(t.at("a").offset, t.at("c").offset);  // alive together at nodes 3 to 5
  EXPECT_EQ(plan_overlap(plan), std::nullopt);
}

// nn.GRU's gates: unsafe_split's schema calls its results fresh, and they are views of its input
// (the zoo's GRU got wrong values from the planned backend while the plan believed the schema).
TEST(MemoryPlan, UnsafeSplitsKeepTheirBaseAlive) {
  Graph g = parse_graph(R"(
graph gates(%x: f32[2, 9]):
  %a: f32[2, 9] = aten::relu(%x)
  %s0: f32[2, 3] stride=[9, 1], %s1: f32[2, 3] stride=[9, 1] offset=3, %s2: f32[2, 3] stride=[9, 1] offset=6 = aten::unsafe_split.Tensor(%a, 3, 1)
  %b: f32[2, 3] = aten::sigmoid(%s0)
  %c: f32[2, 3] = aten::mul.Tensor(%s1, %b)
  %w0: f32[2, 3], %w1: f32[2, 3] offset=6 = aten::unsafe_split_with_sizes(%c, [1, 1])
  %d: f32[2, 3] = aten::tanh(%s2)
  %e: f32[1, 3] = aten::add.Tensor(%w1, %d)
  return (%e)
)");
  const MemoryPlan plan = plan_memory(g);
  const auto t = by_name(plan);
  EXPECT_EQ(t.at("a").last, 5u);  // %s2's read by tanh
  EXPECT_EQ(t.at("c").last, 6u);  // %w1's read by add
  EXPECT_EQ(t.count("s0") + t.count("s2") + t.count("w1"), 0u);
  EXPECT_EQ(allocation_of(*g.find_value("s2")), g.find_value("a"));
  EXPECT_EQ(allocation_of(*g.find_value("w1")), g.find_value("c"));
  EXPECT_NE(t.at("a").offset, t.at("d").offset);  // alive together at node 5
  EXPECT_EQ(plan_overlap(plan), std::nullopt);
}

TEST(MemoryPlan, OutputsAndTheirBasesEscape) {
  Graph g = parse_graph(R"(
graph escape(%x: f32[4, 8]):
  %a: f32[4, 8] = aten::relu(%x)
  %v: f32[32] = aten::view(%a, [32])
  %b: f32[4, 8] = aten::sin(%x)
  %p0: f32[2, 8], %p1: f32[2, 8] offset=16 = aten::split.Tensor(%b, 2)
  %c: f32[2, 8] = aten::cos(%p1)
  return (%v, %c)
)");
  const MemoryPlan plan = plan_memory(g);
  const auto t = by_name(plan);
  EXPECT_EQ(t.count("a"), 0u);  // a view of it is returned
  ASSERT_EQ(t.count("b"), 1u);  // split's elements are views of %b
  EXPECT_EQ(t.at("b").last, 4u);
  EXPECT_EQ(plan.escaping, 2u);  // %a and %c
}

TEST(MemoryPlan, CheckerNamesTensorsThatShareBytesWhileAlive) {
  Graph g = parse_graph(R"(
graph chain(%x: f32[4, 8]):
  %a: f32[4, 8] = aten::relu(%x)
  %b: f32[4, 8] = aten::sin(%a)
  %c: f32[4, 8] = aten::cos(%b)
  return (%c)
)");
  MemoryPlan plan = plan_memory(g);
  ASSERT_EQ(plan.tensors.size(), 2u);
  ASSERT_EQ(plan_overlap(plan), std::nullopt);
  MemoryPlan shared = plan;
  shared.tensors[1].offset = shared.tensors[0].offset + kBytes / 2;
  shared.arena_bytes = 2 * kBytes;
  EXPECT_THAT(plan_overlap(shared).value_or("sound"),
              AllOf(HasSubstr("%a [0, 128)"), HasSubstr("%b [64, 192)"), HasSubstr("alive (node 1)")));
  MemoryPlan short_arena = plan;
  short_arena.arena_bytes = kBytes;
  EXPECT_THAT(plan_overlap(short_arena).value_or("sound"), HasSubstr("ends past the arena of 128 bytes"));
  // Apart in time, the same bytes are sound.
  MemoryPlan apart = plan;
  apart.tensors[0].last = 0;
  apart.tensors[1].first = 1;
  apart.tensors[1].offset = apart.tensors[0].offset;
  EXPECT_EQ(plan_overlap(apart), std::nullopt);
}

// Random graphs (views, multi-output and list ops): every plan is sound, within its bounds, and
// each planned tensor is alive wherever it or a view of it is read.
TEST(MemoryPlan, RandomGraphsGetSoundPlans) {
  std::size_t planned = 0;
  std::size_t shared = 0;
  for (uint64_t seed = 0; seed < 300; ++seed) {
    Graph g = testing::random_graph(seed, 40);
    const MemoryPlan plan = plan_memory(g);
    ASSERT_EQ(plan_overlap(plan), std::nullopt) << "seed " << seed;
    EXPECT_LE(plan.peak_live_bytes, plan.arena_bytes) << "seed " << seed;
    EXPECT_LE(plan.arena_bytes, plan.unshared_bytes) << "seed " << seed;
    std::map<const Value*, const PlannedTensor*> of;
    for (const PlannedTensor& t : plan.tensors) of[t.value] = &t;
    const auto nodes = g.nodes();
    for (std::size_t i = 0; i < nodes.size(); ++i) {
      nodes[i]->for_each_input([&](const Value* v) {
        const Value* owner = allocation_of(*v);
        if (auto it = of.find(owner); it != of.end()) {
          EXPECT_LE(it->second->first, i) << "seed " << seed << " %" << v->name();
          EXPECT_GE(it->second->last, i) << "seed " << seed << " %" << v->name();
        }
      });
    }
    for (const Value* out : g.outputs())
      EXPECT_EQ(of.count(allocation_of(*out)), 0u) << "seed " << seed << ": output %" << out->name() << " planned";
    planned += plan.tensors.size();
    shared += plan.arena_bytes < plan.unshared_bytes ? 1 : 0;
  }
  EXPECT_GT(planned, 1000u);  // the generator makes graphs worth planning
  EXPECT_GT(shared, 100u);    // and the planner reuses memory in most
}

}  // namespace
}  // namespace aotpipe
