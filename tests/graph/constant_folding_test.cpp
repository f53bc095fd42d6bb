// Constant folding (graph/constant_folding.h, InterpreterOptions::fold_constants): which calls
// depend on no graph input, and an interpreter that computes them once giving, at every run, what
// the plain interpreter gives.
#include <aotpipe/graph/constant_folding.h>
#include <aotpipe/graph/interpreter.h>
#include <aotpipe/graph/parser.h>
#include <aotpipe/graph/verifier.h>

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include "test_support.h"

namespace aotpipe {
namespace {

// A mask from full and triu, a scaled constant, a random draw, a factory returned to the caller.
constexpr const char* kMasks = R"(
graph masks(%x: f32[4, 4]):
  %w: f32[4, 4] = constant("w")
  %m: f32[4, 4] = aten::full([4, 4], -1000000000.0, dtype=torch.float32, device=device("cpu"), pin_memory=False)
  %t: f32[4, 4] = aten::triu(%m, 1)
  %s: f32[4, 4] = aten::mul.Scalar(%w, 0.5)
  %b: f32[4, 4] = aten::add.Tensor(%t, %s)
  %y: f32[4, 4] = aten::add.Tensor(%x, %b)
  %r: f32[4, 4] = aten::rand_like(%b)
  %a: i64[4] = aten::arange(4, device=device("cpu"), pin_memory=False)
  %z: f32[4, 4] = aten::mul.Tensor(%y, %r)
  return (%z, %a)
)";

Graph masks() {
  Graph g = parse_graph(kMasks);
  g.bind_constant("w", at::randn({4, 4}));
  verify(g);
  return g;
}

std::vector<std::string> folded_names(const Graph& g, const ConstantFoldingOptions& options = {}) {
  const std::vector<bool> foldable = foldable_calls(g, options);
  std::vector<std::string> names;
  for (std::size_t i = 0; i < foldable.size(); ++i)
    if (foldable[i]) names.push_back(g.nodes()[i]->output()->name());
  return names;
}

TEST(ConstantFolding, CallsThatDependOnNoInput) {
  const Graph g = masks();
  // Not %y (reads %x), %r (random), %a (an output: the caller may write into it), %z.
  EXPECT_EQ(folded_names(g), (std::vector<std::string>{"m", "t", "s", "b"}));
  // Over the size limit: %m and what is computed from it stay computed.
  EXPECT_EQ(folded_names(g, {.max_result_bytes = 32}), std::vector<std::string>{});
  EXPECT_EQ(folded_names(g, {.max_result_bytes = 64}), (std::vector<std::string>{"m", "t", "s", "b"}));
}

TEST(ConstantFolding, NothingACallerReceivesIsFolded) {
  // %v is a view of the folded-looking %m: returning it shares %m's memory with the caller.
  Graph g = parse_graph(R"(
graph shared(%x: f32[4]):
  %m: f32[4] = aten::ones([4], device=device("cpu"), pin_memory=False)
  %v: f32[2, 2] = aten::view(%m, [2, 2])
  %e: f32[4] = aten::exp(%m)
  %y: f32[4] = aten::add.Tensor(%x, %e)
  return (%y, %v)
)");
  verify(g);
  EXPECT_EQ(folded_names(g), std::vector<std::string>{}) << "%m escapes through %v; %e reads %m";
}

TEST(ConstantFolding, TheInterpreterComputesThemOnceAndGivesThePlainResults) {
  const Graph g = masks();
  const Interpreter plain(g);
  const Interpreter folding(g, InterpreterOptions{.check_meta = true, .reinplace = true, .fold_constants = true});
  EXPECT_EQ(folding.num_folded_calls(), 4u);
  const std::uint64_t before = interpreter_counters().folded_calls;
  for (int run = 0; run < 3; ++run) {
    const at::Tensor x = at::randn({4, 4});
    at::manual_seed(run);
    const auto expected = plain.run({x});
    at::manual_seed(run);
    auto actual = folding.run({x});
    EXPECT_TRUE(testing::tensor_lists_close(expected, actual, 0, 0)) << "run " << run;
    actual[0].add_(1);  // the caller owns what it receives: the next run must not see this
    actual[1].add_(1);
  }
  EXPECT_EQ(interpreter_counters().folded_calls, before + 4) << "folded at the first run only";
}

TEST(ConstantFolding, ConcurrentFirstRunsFoldOnce) {
  Graph g = parse_graph(R"(
graph par(%x: f32[64, 64]):
  %i: f32[64, 64] = aten::eye(64, dtype=torch.float32, device=device("cpu"), pin_memory=False)
  %c: f32[64, 64] = aten::mul.Scalar(%i, 3.0)
  %a: f32[64, 64] = aten::mm(%x, %c)
  %b: f32[64, 64] = aten::tanh(%a)
  return (%b)
)");
  verify(g);
  const Interpreter folding(g, InterpreterOptions{.reinplace = true, .fold_constants = true});
  ASSERT_EQ(folding.num_folded_calls(), 2u);
  const std::uint64_t before = interpreter_counters().folded_calls;
  testing::expect_concurrent_runs_match(
      folding, [](const at::Tensor& x) { return (x * 3).tanh(); }, 64);
  EXPECT_EQ(interpreter_counters().folded_calls, before + 2);
}

// Random graphs: folding and planning together give the plain interpreter's results bit for bit.
TEST(ConstantFolding, RandomGraphsKeepTheirResults) {
  std::size_t with_folding = 0;
  for (uint64_t seed = 0; seed < 200; ++seed) {
    const Graph g = testing::random_graph(seed, 40);
    const Interpreter both(
        g, InterpreterOptions{.check_meta = true, .reinplace = true, .plan_memory = true, .fold_constants = true});
    if (both.num_folded_calls() > 0) ++with_folding;
    const auto inputs = testing::make_inputs(g, seed);
    for (int run = 0; run < 2; ++run) {
      at::manual_seed(static_cast<int64_t>(seed));
      const auto expected = Interpreter(g).run(inputs);
      at::manual_seed(static_cast<int64_t>(seed));
      const auto actual = both.run(inputs);
      EXPECT_TRUE(testing::tensor_lists_close(expected, actual, 0, 0)) << "seed " << seed << " run " << run;
    }
  }
  EXPECT_GT(with_folding, 50u) << "the generator's index positions come from arange";
}

}  // namespace
}  // namespace aotpipe
