// Each verifier error kind, caught with its message.
#include <aotpipe/graph/parser.h>
#include <aotpipe/graph/verifier.h>

#include <gtest/gtest.h>

namespace aotpipe {
namespace {

TensorMeta f32(std::vector<int64_t> sizes) { return TensorMeta::contiguous(std::move(sizes)); }

void expect_single_issue(const Graph& g, VerifyErrorKind kind, const std::string& message, VerifyOptions options = {}) {
  auto issues = verify_issues(g, options);
  ASSERT_EQ(issues.size(), 1u) << (issues.empty() ? "no issue" : issues[0].message);
  EXPECT_EQ(issues[0].kind, kind);
  EXPECT_EQ(issues[0].message, message);
  try {
    verify(g, options);
    FAIL() << "verify did not throw";
  } catch (const VerifyError& e) {
    EXPECT_EQ(e.issues().size(), 1u);
    EXPECT_NE(std::string(e.what()).find(message), std::string::npos);
    EXPECT_NE(std::string(e.what()).find(std::string(to_string(kind))), std::string::npos);
  }
}

TEST(Verifier, AcceptsAWellFormedGraph) {
  Graph g = parse_graph(R"(
graph ok(%x: f32[2, 3], %n: int):
  %a: f32[2, 3] = aten::mul.Scalar(%x, %n)
  %s: int = aten::sym_size.int(%a, 0)
  %b: f32[2, 3] = aten::add.Tensor(%a, %x, alpha=%s)
  return (%b)
)");
  EXPECT_TRUE(verify_issues(g).empty());
  EXPECT_NO_THROW(verify(g));
}

TEST(Verifier, UseBeforeDefinition) {
  Graph g("ubd");
  Value* x = g.add_input("x", f32({2}));
  Node* a = g.add_call("aten::sin", {x}, {{"a", f32({2})}});
  Node* b = g.add_call("aten::cos", {a->output()}, {{"b", f32({2})}});
  g.set_outputs({b->output()});
  g.move_node(b, a);
  expect_single_issue(g, VerifyErrorKind::UseBeforeDefinition,
                      "graph 'ubd': node %b = aten::cos reads %a before its definition");
}

TEST(Verifier, ForeignValueAndDanglingOutput) {
  Graph other("other");
  Value* stranger = other.add_input("stranger", f32({2}));
  Graph g("main");
  Value* x = g.add_input("x", f32({2}));
  Node* a = g.add_call("aten::sin", {x}, {{"a", f32({2})}});
  g.set_outputs({a->output()});
  g.replace_all_uses(x, stranger);
  auto issues = verify_issues(g);
  ASSERT_EQ(issues.size(), 1u);
  EXPECT_EQ(issues[0].kind, VerifyErrorKind::ForeignValue);
  EXPECT_EQ(issues[0].message, "graph 'main': node %a = aten::sin reads %stranger, a value of another graph");

  Graph h("dangling");
  Value* y = h.add_input("y", f32({2}));
  h.set_outputs({y});
  h.replace_all_uses(y, stranger);
  expect_single_issue(h, VerifyErrorKind::DanglingOutput,
                      "graph 'dangling': output 0 (%stranger) is not defined in this graph");
}

TEST(Verifier, ArgumentCount) {
  Graph g("count");
  Value* x = g.add_input("x", f32({2}));
  Node* a = g.add_call("aten::sin", {x}, {{"a", f32({2})}});
  a->args().push_back(Argument(int64_t{1}));
  g.set_outputs({a->output()});
  expect_single_issue(g, VerifyErrorKind::ArgumentCount,
                      "graph 'count': node %a = aten::sin has 2 arguments, its schema takes 1");
}

TEST(Verifier, ArgumentTypes) {
  Graph g("types");
  Value* x = g.add_input("x", f32({2}));
  Node* a = g.add_call("aten::mul.Tensor", {x, x}, {{"a", f32({2})}});
  a->args()[1] = Argument(int64_t{3});
  g.set_outputs({a->output()});
  expect_single_issue(
      g, VerifyErrorKind::ArgumentType,
      "graph 'types': node %a = aten::mul.Tensor: argument 1 'other' expects Tensor, got constant 3 (Int)");

  Graph h("types2");
  Value* y = h.add_input("y", f32({2, 2}));
  Node* s = h.add_call("aten::sum.dim_IntList", {y, std::vector<int64_t>{0}}, {{"s", f32({2})}});
  s->args()[1] = Argument(y);
  h.set_outputs({s->output()});
  expect_single_issue(
      h, VerifyErrorKind::ArgumentType,
      "graph 'types2': node %s = aten::sum.dim_IntList: argument 1 'dim' expects int[]?, got %y (Tensor)");

  Graph c("types3");
  Value* z = c.add_input("z", f32({2}));
  Node* cat = c.add_call("aten::cat", {ValueList{{z, nullptr}}}, {{"cat", f32({2})}});
  c.set_outputs({cat->output()});
  expect_single_issue(
      c, VerifyErrorKind::ArgumentType,
      "graph 'types3': node %cat = aten::cat: argument 0 'tensors' expects Tensor[], got a list of values");
}

TEST(Verifier, OutputCountAndType) {
  Graph g = parse_graph(R"(
graph outs(%x: f32[2, 3]):
  %n: f32[2] = aten::sym_size.int(%x, 0)
  return (%n)
)");
  expect_single_issue(g, VerifyErrorKind::OutputType,
                      "graph 'outs': node %n = aten::sym_size.int defines %n as Tensor, the schema returns int");
}

TEST(Verifier, MissingTensorMeta) {
  Graph g("meta");
  Value* x = g.add_input("x", ValueType::Tensor);
  g.set_outputs({x});
  expect_single_issue(g, VerifyErrorKind::MissingTensorMeta, "graph 'meta': tensor value %x has no TensorMeta");
  EXPECT_TRUE(verify_issues(g, {.require_tensor_meta = false}).empty());

  // An unread result may be an undefined tensor (a gradient nobody asked for): no meta needed.
  Graph h("unread");
  Value* y = h.add_input("y", f32({2, 3}));
  Node* mm = h.add_call("aten::aminmax", {y}, {{"mn", f32({})}, {"mx", std::nullopt}});
  h.set_outputs({mm->output(0)});
  EXPECT_TRUE(verify_issues(h).empty());
  h.set_outputs({mm->output(0), mm->output(1)});
  expect_single_issue(h, VerifyErrorKind::MissingTensorMeta, "graph 'unread': tensor value %mx has no TensorMeta");
}

TEST(Verifier, UnusedValueIsDeadCodeUnlessAllowed) {
  Graph g = parse_graph(R"(
graph dead(%x: f32[2]):
  %a: f32[2] = aten::sin(%x)
  %b: f32[2] = aten::cos(%x)
  %v: f32[2], %m: f32[] = aten::var_mean.correction(%x)
  return (%a, %m)
)");
  expect_single_issue(g, VerifyErrorKind::UnusedValue,
                      "graph 'dead': node %b = aten::cos: no value it defines is used (dead code)");
  EXPECT_TRUE(verify_issues(g, {.allow_dead_code = true}).empty());
}

TEST(Verifier, UnboundConstant) {
  Graph g = parse_graph(R"(
graph c(%x: f32[2]):
  %w: f32[2] = constant("w")
  %a: f32[2] = aten::mul.Tensor(%x, %w)
  return (%a)
)");
  EXPECT_TRUE(verify_issues(g).empty());
  expect_single_issue(g, VerifyErrorKind::UnboundConstant, "graph 'c': constant %w (\"w\") has no tensor bound",
                      {.require_bound_constants = true});
}

}  // namespace
}  // namespace aotpipe
