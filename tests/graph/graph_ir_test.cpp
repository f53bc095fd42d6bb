// The IR itself: building, printing, copying, DCE, subgraph extraction.
#include <aotpipe/graph/graph.h>
#include <aotpipe/graph/interpreter.h>
#include <aotpipe/graph/parser.h>
#include <aotpipe/graph/passes.h>
#include <aotpipe/graph/verifier.h>

#include <gtest/gtest.h>

#include <set>
#include <stdexcept>

#include "test_support.h"

namespace aotpipe {
namespace {

TensorMeta f32(std::vector<int64_t> sizes) { return TensorMeta::contiguous(std::move(sizes)); }

Graph small_graph() {
  Graph g("small");
  Value* x = g.add_input("x", f32({2, 3}));
  Value* y = g.add_input("y", f32({2, 3}));
  Value* mul = g.add_call("aten::mul.Tensor", {x, y}, {{"", f32({2, 3})}})->output();
  Value* add = g.add_call("aten::add.Tensor", {mul, x, 2.0}, {{"", f32({2, 3})}})->output();
  Value* sum = g.add_call("aten::sum.dim_IntList", {add, std::vector<int64_t>{1}}, {{"", f32({2})}})->output();
  g.set_outputs({sum, mul});
  return g;
}

TEST(GraphIr, PrintsQualifiedOverloadsAndOmitsDefaults) {
  Graph g = small_graph();
  EXPECT_EQ(g.num_inputs(), 2u);
  EXPECT_EQ(g.num_outputs(), 2u);
  EXPECT_EQ(g.nodes().size(), 3u);
  EXPECT_EQ(g.to_string(),
            "graph small(%x: f32[2, 3], %y: f32[2, 3]):\n"
            "  %mul: f32[2, 3] = aten::mul.Tensor(%x, %y)\n"
            "  %add: f32[2, 3] = aten::add.Tensor(%mul, %x, alpha=2.0)\n"
            "  %sum: f32[2] = aten::sum.dim_IntList(%add, [1])\n"
            "  return (%sum, %mul)\n");
}

TEST(GraphIr, FreshNamesFollowTheOpName) {
  Graph g;
  Value* x = g.add_input("x", f32({3}));
  Value* a = g.add_call("aten::sin", {x})->output();
  Value* b = g.add_call("aten::sin", {a})->output();
  EXPECT_EQ(a->name(), "sin");
  EXPECT_EQ(b->name(), "sin_1");
  EXPECT_EQ(g.find_value("sin_1"), b);
  EXPECT_EQ(g.find_value("nope"), nullptr);
}

TEST(GraphIr, AddCallRejectsMissingArgumentsAndUnknownOps) {
  Graph g;
  Value* x = g.add_input("x", f32({3}));
  EXPECT_THROW(
      {
        try {
          g.add_call("aten::mul.Tensor", {x});
        } catch (const GraphError& e) {
          EXPECT_STREQ(e.what(), "aten::mul.Tensor: missing argument 1 'other' (no default)");
          throw;
        }
      },
      GraphError);
  EXPECT_THROW(
      {
        try {
          g.add_call("aten::no_such_op.Tensor", {x});
        } catch (const GraphError& e) {
          EXPECT_STREQ(e.what(), "unknown operator 'aten::no_such_op.Tensor'");
          throw;
        }
      },
      GraphError);
}

TEST(GraphIr, MultiOutputAndListReturningOps) {
  Graph g("multi");
  Value* x = g.add_input("x", f32({4, 6}));
  Node* vm =
      g.add_call("aten::var_mean.correction", {x, std::vector<int64_t>{1}}, {{"var", f32({4})}, {"mean", f32({4})}});
  ASSERT_EQ(vm->num_outputs(), 2u);
  Node* split = g.add_call("aten::split.Tensor", {x, 2, 1}, {{"", f32({4, 2})}, {"", f32({4, 2})}, {"", f32({4, 2})}});
  ASSERT_EQ(split->num_outputs(), 3u);
  g.set_outputs({vm->output(0), vm->output(1), split->output(2)});
  EXPECT_NO_THROW(verify(g, {.allow_dead_code = true}));
  Graph back = parse_graph(g.to_string());
  EXPECT_EQ(back.to_string(), g.to_string());
}

// Values named by the graph take the hint's sequence and skip names already taken; an empty hint
// names as fresh_name does ("v", "v_1"...).
TEST(GraphIr, FreshValueNamesFollowTheHintAndSkipTakenNames) {
  Graph g("fresh");
  Value* taken = g.add_input("neg_1", f32({3}));
  Value* x = g.add_input("", f32({3}));
  EXPECT_EQ(x->name(), "arg");
  Value* a = g.add_call("aten::neg", {x})->output(0);
  Value* b = g.add_call("aten::neg", {a})->output(0);
  EXPECT_EQ(a->name(), "neg");
  EXPECT_EQ(b->name(), "neg_2");  // neg_1 is the input's
  EXPECT_EQ(g.find_value("neg_1"), taken);
  Value* c1 = g.add_constant_ref("", f32({2}), "");
  Value* c2 = g.add_constant_ref("", f32({2}), "");
  EXPECT_EQ(c1->name(), "v");
  EXPECT_EQ(c2->name(), "v_1");
  EXPECT_EQ(g.fresh_name(""), "v_2");
}

// A call that fails while its values are named (a duplicate name, a `before` node of another
// graph) leaves no name behind: the graph stays whole and the names stay free.
TEST(GraphIr, AFailedAddCallLeavesNoNameBehind) {
  Graph g("names");
  Value* x = g.add_input("x", f32({4, 6}));
  EXPECT_THROW(
      g.add_call("aten::var_mean.correction", {x, std::vector<int64_t>{1}}, {{"var", f32({4})}, {"x", f32({4})}}),
      GraphError);
  EXPECT_EQ(g.find_value("var"), nullptr);
  EXPECT_EQ(g.find_value("x"), x);
  Graph other("other");
  Node* elsewhere = other.add_call("aten::neg", {other.add_input("y", f32({3}))});
  EXPECT_THROW(g.add_call("aten::neg", {x}, {{"neg_x", f32({4, 6})}}, elsewhere), GraphError);
  EXPECT_THROW(g.add_constant_ref("c", f32({2}), "c_value", elsewhere), GraphError);
  EXPECT_EQ(g.find_value("neg_x"), nullptr);
  EXPECT_EQ(g.find_value("c_value"), nullptr);
  EXPECT_EQ(g.num_nodes(), 0u);
  // The names are free, and enough new ones to grow the index find the right values.
  Node* vm =
      g.add_call("aten::var_mean.correction", {x, std::vector<int64_t>{1}}, {{"var", f32({4})}, {"mean", f32({4})}});
  EXPECT_EQ(g.find_value("var"), vm->output(0));
  std::vector<Value*> made;
  for (int i = 0; i < 200; ++i) made.push_back(g.add_call("aten::neg", {x})->output(0));
  for (Value* v : made) EXPECT_EQ(g.find_value(v->name()), v);
  EXPECT_EQ(g.find_value("neg_x"), nullptr);
}

TEST(GraphIr, CopyIsDeepAndIndependent) {
  Graph g = small_graph();
  Graph copy = g;
  EXPECT_EQ(copy.to_string(), g.to_string());
  for (Value* in : copy.inputs()) EXPECT_EQ(in->graph(), &copy);
  for (Node* n : copy.nodes()) {
    EXPECT_EQ(n->graph(), &copy);
    for (Value* v : n->inputs()) EXPECT_EQ(v->graph(), &copy);
  }
  copy.add_call("aten::neg", {copy.input(0)}, {{"", f32({2, 3})}});
  EXPECT_EQ(g.nodes().size(), 3u);
  EXPECT_EQ(copy.nodes().size(), 4u);
  Graph moved = std::move(copy);
  for (Node* n : moved.nodes()) EXPECT_EQ(n->graph(), &moved);
  EXPECT_NO_THROW(verify(moved, {.allow_dead_code = true}));
}

// Passes index flat tables by Value::id and Node::id: ids must be distinct, below the limits,
// survive moves, start afresh in copies and never be reused after an erase.
TEST(GraphIr, ValueAndNodeIdsAreDenseDistinctAndNeverReused) {
  Graph g = small_graph();
  auto check_ids = [](const Graph& graph) {
    std::set<std::uint32_t> values, nodes;
    for (const Value* in : graph.inputs()) EXPECT_TRUE(values.insert(in->id()).second);
    for (const Node* n : graph.nodes()) {
      EXPECT_TRUE(nodes.insert(n->id()).second);
      EXPECT_LT(n->id(), graph.node_id_limit());
      for (const Value* v : n->outputs()) EXPECT_TRUE(values.insert(v->id()).second);
    }
    for (std::uint32_t id : values) EXPECT_LT(id, graph.value_id_limit());
  };
  check_ids(g);
  EXPECT_EQ(g.value_id_limit(), g.num_inputs() + g.num_nodes());  // one result per node here
  const std::size_t limit = g.value_id_limit();
  Value* extra = g.add_call("aten::neg", {g.input(0)}, {{"", f32({2, 3})}})->output();
  EXPECT_EQ(extra->id(), limit);
  g.erase_node(extra->producer());
  Value* again = g.add_call("aten::neg", {g.input(0)}, {{"", f32({2, 3})}})->output();
  EXPECT_EQ(again->id(), limit + 1);  // not reused
  check_ids(g);
  Graph copy = g;
  check_ids(copy);
  EXPECT_EQ(copy.value_id_limit(), copy.num_inputs() + copy.num_nodes());  // dense again
  Graph moved = std::move(copy);
  check_ids(moved);

  // A ValueMap maps one graph's values only.
  ValueMap map(g);
  EXPECT_FALSE(map.contains(g.input(0)));
  EXPECT_THROW(map.at(g.input(0)), std::out_of_range);
  map.set(g.input(0), moved.input(0));
  EXPECT_EQ(map.at(g.input(0)), moved.input(0));
  EXPECT_FALSE(map.contains(moved.input(0)));
  EXPECT_THROW(map.set(moved.input(0), g.input(0)), std::invalid_argument);
}

TEST(GraphIr, DeadCodeEliminationKeepsLiveAndSideEffectingNodes) {
  Graph g("dce");
  Value* x = g.add_input("x", f32({3}));
  Value* dead1 = g.add_call("aten::sin", {x}, {{"", f32({3})}})->output();
  g.add_call("aten::cos", {dead1}, {{"", f32({3})}});  // dead, reads dead1
  Value* buf = g.add_input("buf", f32({3}));
  g.add_call("aten::add_.Tensor", {buf, x}, {{"", f32({3})}});  // mutation: kept
  Value* live = g.add_call("aten::exp", {x}, {{"", f32({3})}})->output();
  g.set_outputs({live});
  EXPECT_FALSE(verify_issues(g).empty());
  EXPECT_EQ(eliminate_dead_code(g), 2u);
  ASSERT_EQ(g.nodes().size(), 2u);
  EXPECT_EQ(g.nodes()[0]->qualified_name(), "aten::add_.Tensor");
  EXPECT_EQ(g.nodes()[1]->qualified_name(), "aten::exp");
  EXPECT_TRUE(verify_issues(g).empty());
  EXPECT_EQ(eliminate_dead_code(g), 0u);
}

TEST(GraphIr, ExtractSubgraphBetweenValues) {
  Graph g("whole");
  Value* x = g.add_input("x", f32({3}));
  Value* y = g.add_input("y", f32({3}));
  Value* a = g.add_call("aten::sin", {x}, {{"a", f32({3})}})->output();
  Value* b = g.add_call("aten::mul.Tensor", {a, y}, {{"b", f32({3})}})->output();
  Value* c = g.add_call("aten::cos", {b}, {{"c", f32({3})}})->output();
  Value* unrelated = g.add_call("aten::exp", {y}, {{"e", f32({3})}})->output();
  g.set_outputs({c, unrelated});

  std::vector<Value*> ins{a, y};
  std::vector<Value*> outs{c};
  Graph sub = extract_subgraph(g, ins, outs, "tail");
  EXPECT_EQ(sub.to_string(),
            "graph tail(%a: f32[3], %y: f32[3]):\n"
            "  %b: f32[3] = aten::mul.Tensor(%a, %y)\n"
            "  %c: f32[3] = aten::cos(%b)\n"
            "  return (%c)\n");
  EXPECT_TRUE(verify_issues(sub).empty());

  // Runs like the corresponding part of the whole graph.
  auto inputs = testing::make_inputs(g);
  auto whole = Interpreter(g).run(inputs);
  auto part = Interpreter(sub).run({inputs[0].sin(), inputs[1]});
  EXPECT_TRUE(testing::tensors_close(whole[0], part[0]));

  std::vector<Value*> missing{a};
  try {
    extract_subgraph(g, missing, outs, "tail");
    FAIL() << "expected a GraphError";
  } catch (const GraphError& e) {
    EXPECT_STREQ(
        e.what(),
        "extract_subgraph 'tail': the outputs depend on %y, an input of 'whole' not among the subgraph's inputs");
  }
}

TEST(GraphIr, ConstantsAreNamedAndBound) {
  Graph g("consts");
  Value* x = g.add_input("x", f32({3}));
  Value* w = g.add_constant("weight", at::arange(3, at::kFloat), "w");
  Value* y = g.add_call("aten::mul.Tensor", {x, w}, {{"", f32({3})}})->output();
  g.set_outputs({y});
  EXPECT_EQ(g.to_string(),
            "graph consts(%x: f32[3]):\n"
            "  %w: f32[3] = constant(\"weight\")\n"
            "  %mul: f32[3] = aten::mul.Tensor(%x, %w)\n"
            "  return (%mul)\n");
  auto in = at::ones({3});
  EXPECT_TRUE(testing::tensors_close(at::arange(3, at::kFloat), Interpreter(g).run({in})[0]));

  Graph parsed = parse_graph(g.to_string());
  EXPECT_FALSE(verify_issues(parsed, {.require_bound_constants = true}).empty());
  EXPECT_THROW(Interpreter{parsed}, GraphError);
  parsed.bind_constant("weight", at::full({3}, 2.0));
  EXPECT_TRUE(testing::tensors_close(at::full({3}, 2.0), Interpreter(parsed).run({in})[0]));
}

TEST(GraphIr, AttributesSurviveCopyAndText) {
  Graph g = small_graph();
  g.nodes()[2]->attrs()["phase"] = "backward";
  g.nodes()[2]->attrs()["note"] = "needs quoting, yes";
  std::string text = g.to_string();
  EXPECT_NE(text.find("{note=\"needs quoting, yes\", phase=backward}"), std::string::npos) << text;
  EXPECT_EQ(parse_graph(text).to_string(), text);
  EXPECT_EQ(Graph(g).nodes()[2]->attrs().at("phase"), "backward");
}

TEST(GraphIr, MoveAndReplaceUses) {
  Graph g = small_graph();
  Value* x = g.input(0);
  Value* neg = g.add_call("aten::neg", {x}, {{"", f32({2, 3})}}, g.nodes()[0])->output();
  EXPECT_EQ(g.nodes()[0]->output(), neg);
  g.replace_all_uses(g.nodes()[1]->output(), neg);  // uses of %mul now read %neg
  EXPECT_EQ(g.outputs()[1], neg);
  g.move_node(g.nodes()[0], nullptr);  // %neg now after its readers
  auto issues = verify_issues(g, {.allow_dead_code = true});
  ASSERT_FALSE(issues.empty());
  EXPECT_EQ(issues[0].kind, VerifyErrorKind::UseBeforeDefinition);
}

}  // namespace
}  // namespace aotpipe
