// The IR itself: building, printing, copying, DCE, subgraph extraction.
#include <aotpipe/graph/graph.h>
#include <aotpipe/graph/interpreter.h>
#include <aotpipe/graph/parser.h>
#include <aotpipe/graph/passes.h>
#include <aotpipe/graph/verifier.h>

#include <gtest/gtest.h>

#include <map>
#include <random>
#include <set>
#include <string>
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

// Fresh names are not kept in the explicit-name table: each way a name can be taken (explicitly
// before or after, by a hint that extends another, freed by a rename or an erase) must still be
// seen, and copies must carry both kinds.
TEST(GraphIr, FreshAndExplicitNamesNeverMeetWhicheverComesFirst) {
  Graph g("names");
  Value* x = g.add_input("x", f32({3}));
  Value* a = g.add_call("aten::neg", {x})->output(0);
  Value* b = g.add_call("aten::neg", {a})->output(0);
  ASSERT_EQ(b->name(), "neg_1");
  EXPECT_THROW(g.add_input("neg_1", f32({3})), GraphError);  // explicit after fresh
  EXPECT_THROW(g.add_input("neg", f32({3})), GraphError);
  EXPECT_THROW(g.rename(x, "neg"), GraphError);
  Value* explicit_neg2 = g.add_input("neg_2", f32({3}));  // explicit before fresh
  EXPECT_EQ(g.add_call("aten::neg", {x})->output(0)->name(), "neg_3");
  EXPECT_EQ(g.find_value("neg_2"), explicit_neg2);
  EXPECT_EQ(g.find_value("neg_02"), nullptr);  // not a suffix fresh names write
  EXPECT_EQ(g.find_value("neg_0"), nullptr);

  // A renamed or erased fresh value frees its name; the sequence still never reuses it.
  g.rename(b, "y");
  EXPECT_EQ(g.find_value("neg_1"), nullptr);
  EXPECT_EQ(g.find_value("y"), b);
  g.rename(explicit_neg2, "neg_1");
  EXPECT_EQ(g.find_value("neg_1"), explicit_neg2);
  EXPECT_EQ(g.find_value("neg_2"), nullptr);
  Value* dead = g.add_call("aten::neg", {x})->output(0);
  ASSERT_EQ(dead->name(), "neg_4");
  g.erase_node(dead->producer());
  EXPECT_EQ(g.find_value("neg_4"), nullptr);
  EXPECT_EQ(g.add_input("neg_4", f32({3}))->name(), "neg_4");
  EXPECT_EQ(g.add_call("aten::neg", {x})->output(0)->name(), "neg_5");

  // Hints that extend one another ("c" and "c_1") never hand out the same name.
  Value* c = g.add_constant_ref("k0", f32({1}), "");
  EXPECT_EQ(c->name(), "k0");
  Value* c1 = g.add_constant_ref("c", f32({1}), "");
  Value* c2 = g.add_constant_ref("c", f32({1}), "");
  Value* c3 = g.add_constant_ref("c_1", f32({1}), "");  // "c_1" is c2's
  Value* c4 = g.add_constant_ref("c_2", f32({1}), "");
  Value* c5 = g.add_constant_ref("c", f32({1}), "");  // "c_2" is c4's
  EXPECT_EQ(c1->name(), "c");
  EXPECT_EQ(c2->name(), "c_1");
  EXPECT_EQ(c3->name(), "c_1_1");
  EXPECT_EQ(c4->name(), "c_2");
  EXPECT_EQ(c5->name(), "c_3");
  EXPECT_EQ(g.fresh_name("c_1"), "c_1_2");
  for (Value* v : {c1, c2, c3, c4, c5}) EXPECT_EQ(g.find_value(v->name()), v);

  // A copy finds every name and continues every sequence; the original is untouched by it.
  Graph copy = g;
  for (const Node* n : g.nodes())
    for (const Value* v : n->outputs()) {
      Value* in_copy = copy.find_value(v->name());
      ASSERT_NE(in_copy, nullptr) << v->name();
      EXPECT_EQ(in_copy->graph(), &copy);
      EXPECT_EQ(copy.index_of(in_copy->producer()), g.index_of(v->producer()));
    }
  EXPECT_EQ(copy.find_value("neg_2"), nullptr);
  EXPECT_EQ(copy.add_call("aten::neg", {copy.input(0)})->output(0)->name(), "neg_6");
  EXPECT_EQ(copy.add_constant_ref("c", f32({1}), "")->name(), "c_4");
  EXPECT_EQ(g.find_value("neg_6"), nullptr);
  EXPECT_EQ(g.add_call("aten::neg", {x})->output(0)->name(), "neg_6");
}

// Against a plain map of the live names, under random sequences of every naming operation, with
// hints that extend one another and more hints than the index scans (it then hashes them).
TEST(GraphIr, ValueNamesStayDistinctAndFindableUnderRandomEdits) {
  const std::vector<std::string> hints = {"a", "a_1", "a_1_1", "a_2", "b", "b_10", "v", "arg", "a_01"};
  for (unsigned seed = 0; seed < 16; ++seed) {
    std::mt19937 rng(seed);
    auto pick = [&](std::size_t n) { return static_cast<std::size_t>(rng() % n); };
    Graph g("random");
    std::map<std::string, Value*> live;
    auto made = [&](Value* v) {
      ASSERT_EQ(live.count(v->name()), 0u) << "seed " << seed << ": " << v->name() << " given twice";
      live[v->name()] = v;
    };
    auto name_from_pool = [&] {
      const std::string& hint = hints[pick(hints.size())];
      const std::size_t k = pick(4);
      return k == 0 ? hint : hint + "_" + std::to_string(k);
    };
    for (int step = 0; step < 300; ++step) {
      switch (pick(seed % 4 == 0 ? 6 : 5)) {
        case 0:
        case 1: {  // fresh, from a hint of the pool
          const std::string& hint = hints[pick(hints.size())];
          Value* v = g.add_constant_ref(hint, f32({1}), "");
          EXPECT_TRUE(v->name() == hint || v->name().rfind(hint + "_", 0) == 0) << v->name();
          made(v);
          break;
        }
        case 2: {  // explicit: refused exactly when taken
          const std::string name = name_from_pool();
          if (live.count(name)) {
            EXPECT_THROW(g.add_constant_ref("e", f32({1}), name), GraphError) << name;
          } else {
            made(g.add_constant_ref("e", f32({1}), name));
          }
          break;
        }
        case 3: {  // rename
          if (live.empty()) break;
          auto it = std::next(live.begin(), static_cast<std::ptrdiff_t>(pick(live.size())));
          const std::string name = name_from_pool();
          Value* v = it->second;
          if (name == v->name()) break;
          if (live.count(name)) {
            EXPECT_THROW(g.rename(v, name), GraphError) << name;
          } else {
            live.erase(it);
            g.rename(v, name);
            made(v);
          }
          break;
        }
        case 4: {  // erase
          if (live.empty()) break;
          auto it = std::next(live.begin(), static_cast<std::ptrdiff_t>(pick(live.size())));
          g.erase_node(it->second->producer());
          live.erase(it);
          break;
        }
        case 5:  // many distinct hints: past what the index scans
          made(g.add_constant_ref("h" + std::to_string(pick(64)), f32({1}), ""));
          break;
      }
    }
    const Graph copy = g;
    for (const Graph* graph : {static_cast<const Graph*>(&g), &copy}) {
      for (const auto& [name, v] : live) {
        Value* found = graph->find_value(name);
        ASSERT_NE(found, nullptr) << "seed " << seed << ": " << name;
        EXPECT_EQ(graph->index_of(found->producer()), g.index_of(v->producer())) << name;
      }
      for (const std::string& hint : hints)
        for (int k = 0; k < 6; ++k) {
          const std::string name = k == 0 ? hint : hint + "_" + std::to_string(k);
          EXPECT_EQ(graph->find_value(name) != nullptr, live.count(name) > 0) << "seed " << seed << ": " << name;
        }
    }
  }
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
