// The text form: print -> parse -> print is the identity, on hand-written graphs covering every
// literal kind and on generated graphs; parse errors name line, column and what was expected.
#include <aotpipe/graph/interpreter.h>
#include <aotpipe/graph/parser.h>
#include <aotpipe/graph/passes.h>
#include <aotpipe/graph/printer.h>
#include <aotpipe/graph/verifier.h>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "test_support.h"

namespace aotpipe {
namespace {

void expect_round_trip(const std::string& text) {
  Graph g = parse_graph(text);
  std::string printed = g.to_string();
  EXPECT_EQ(printed, text);
  EXPECT_EQ(parse_graph(printed).to_string(), printed);
}

TEST(TextFormat, EveryLiteralKindRoundTrips) {
  expect_round_trip(
      "graph literals(%x: f32[2, 3] requires_grad, %y: f64[3, 2] stride=[1, 3] offset=4, %z: bf16[] device=cuda:1, %n: "
      "int, %s: Scalar):\n"
      "  %a: f32[2, 3] = aten::add.Tensor(%x, %x, alpha=-2.5e-07)\n"
      "  %b: f32[2, 3] = aten::clamp(%a, -inf, nan)\n"
      "  %c: f32[2, 3] = aten::mul.Scalar(%b, -3)\n"
      "  %d: f64[2, 3] = aten::_to_copy(%c, dtype=torch.float64, layout=torch.strided, device=device(\"cpu\"), "
      "non_blocking=True, memory_format=torch.channels_last)\n"
      "  %e: f32[6] = aten::view(%a, [6])\n"
      "  %f: f32[2] = aten::norm.ScalarOpt_dim(%x, 2.0, [1])\n"
      "  %g: f32[2, 3] = aten::gelu(%x, approximate=\"tanh\")\n"
      "  %h: f32[2, 3] = aten::upsample_nearest1d.vec(%x, None, [1.5])\n"
      "  %i: f32[2, 3] = aten::mul.Scalar(%x, %s)\n"
      "  %j: f32[2, 3] = aten::div.Tensor_mode(%x, %x, rounding_mode=None)\n"
      "  %k: f32[2, 3] = aten::div.Tensor_mode(%x, %x, rounding_mode=\"floor\")\n"
      "  %w: f32[3] = constant(\"weights \\\"quoted\\\"\")\n"
      "  %l: f32[3, 2] = aten::new_empty_strided(%x, [3, 2], [1, 3], dtype=torch.float32, pin_memory=False) "
      "{phase=forward}\n"
      "  aten::_assert_async.msg(%x, \"message with\\nnewline\")\n"
      "  return (%a, %b, %d, %e, %f, %g, %i, %j, %k, %l, %w)\n");
}

// The canonical form is the print of a copy renamed g / v0, v1, ... in definition order (what the
// compile cache keys on), made without the copy.
TEST(TextFormat, CanonicalFormIsThePrintOfTheRenamedGraph) {
  for (int seed = 0; seed < 30; ++seed) {
    Graph g = testing::random_graph(seed);
    Graph renamed(g);
    renamed.set_name("g");
    std::vector<Value*> values(renamed.inputs().begin(), renamed.inputs().end());
    for (Node* node : renamed.nodes())
      for (Value* v : node->outputs()) values.push_back(v);
    // Two passes: a final name may be taken by another value until every value has moved.
    for (std::size_t i = 0; i < values.size(); ++i) renamed.rename(values[i], fmt::format("__tmp_{}", i));
    for (std::size_t i = 0; i < values.size(); ++i) renamed.rename(values[i], fmt::format("v{}", i));
    EXPECT_EQ(print_graph_canonical(g), print_graph(renamed)) << "seed " << seed;
    EXPECT_EQ(print_graph_canonical(parse_graph(print_graph(renamed))), print_graph_canonical(g));
  }
}

// Names and attribute values the lexer would read as numbers are quoted, so they read back.
TEST(TextFormat, WordsTheLexerReadsAsNumbersAreQuoted) {
  for (const std::string word : {"inf", "nan"}) {
    Graph g(word);
    Value* x = g.add_input("x", TensorMeta::contiguous({2}));
    Node* node = g.add_call("aten::neg", {x}, {{"", TensorMeta::contiguous({2})}});
    node->attrs()["phase"] = word;
    g.set_outputs({node->output()});
    const std::string text = print_graph(g);
    const Graph back = parse_graph(text);
    EXPECT_EQ(back.name(), word) << text;
    EXPECT_EQ(back.nodes().front()->attrs().at("phase"), word) << text;
    EXPECT_EQ(print_graph(back), text);
  }
}

// peek_graph_name reads the declared name from a prefix of the text, as the parser would.
TEST(TextFormat, PeekGraphNameReadsTheDeclaredNameFromAPrefix) {
  for (const std::string name : {"mlp", "ns::block.v2", "with space", "quote\" and \\ slash", "tab\there"}) {
    Graph g(name);
    g.set_outputs({g.add_input("x", ValueType::Tensor)});
    const std::string text = print_graph(g);
    ASSERT_EQ(parse_graph(text).name(), name);
    EXPECT_EQ(peek_graph_name(text), name) << text;
    EXPECT_EQ(peek_graph_name(text.substr(0, text.find('('))), name) << "a prefix up to the parenthesis";
  }
  EXPECT_EQ(peek_graph_name("# a comment\n  graph g(%x: f32[2]):"), "g");
  EXPECT_EQ(peek_graph_name("graphx g("), std::nullopt);
  EXPECT_EQ(peek_graph_name("graph (%x"), std::nullopt);
  EXPECT_EQ(peek_graph_name("graph \"cut off"), std::nullopt);
  EXPECT_EQ(peek_graph_name("\x01\x02 binary"), std::nullopt);
  EXPECT_EQ(peek_graph_name(""), std::nullopt);
}

TEST(TextFormat, AcceptsAlternativeSpellingsAndNormalizesThem) {
  Graph g = parse_graph(R"(
# a comment line
graph alt(%x: f32[4]):   # trailing comment
  %a: f32[4] = aten::add.Tensor(%x, other=%x)
  %b: f32[4] = aten::mm.default(%a, %a)
  %c: f32[4] = aten::sum.dim_IntList(%a, 0, False, dtype=None)
  return (%a, %b, %c)
)");
  EXPECT_EQ(g.to_string(),
            "graph alt(%x: f32[4]):\n"
            "  %a: f32[4] = aten::add.Tensor(%x, %x)\n"
            "  %b: f32[4] = aten::mm(%a, %a)\n"
            "  %c: f32[4] = aten::sum.dim_IntList(%a, [0])\n"
            "  return (%a, %b, %c)\n");
}

TEST(TextFormat, GeneratedGraphsRoundTripAndRunTheSame) {
  for (uint64_t seed = 0; seed < 60; ++seed) {
    Graph g = testing::random_graph(seed);
    eliminate_dead_code(g);
    ASSERT_TRUE(verify_issues(g).empty()) << g;
    std::string text = g.to_string();
    Graph back = parse_graph(text);
    ASSERT_EQ(back.to_string(), text) << "seed " << seed;
    auto inputs = testing::make_inputs(g, seed);
    auto expected = Interpreter(g, {.check_meta = true}).run(inputs);
    auto actual = Interpreter(back, {.check_meta = true}).run(inputs);
    EXPECT_TRUE(testing::tensor_lists_close(expected, actual, 0, 0)) << "seed " << seed << "\n" << text;
  }
}

struct BadText {
  const char* text;
  std::size_t line, column;
  const char* message;
};

class ParseErrors : public ::testing::TestWithParam<BadText> {};

TEST_P(ParseErrors, NameLineColumnAndWhatWasExpected) {
  const BadText& bad = GetParam();
  try {
    parse_graph(bad.text);
    FAIL() << "parsed without error: " << bad.text;
  } catch (const ParseError& e) {
    EXPECT_EQ(e.line(), bad.line) << e.what();
    EXPECT_EQ(e.column(), bad.column) << e.what();
    EXPECT_EQ(e.message(), bad.message) << e.what();
    EXPECT_EQ(std::string(e.what()), fmt::format("line {}, column {}: {}", bad.line, bad.column, bad.message));
  }
}

INSTANTIATE_TEST_SUITE_P(
    TextFormat, ParseErrors,
    ::testing::Values(
        BadText{"", 1, 1, "expected 'graph', found end of input"},
        // Layouts outside int64 (found by tests/fuzz/graph_text_fuzzer: numel and strides overflowed).
        BadText{"graph g(%x: f32[4, 9223372036854775807]):\n  return (%x)", 1, 16,
                "sizes [4, 9223372036854775807] hold more than 2^63 elements"},
        BadText{"graph g(%x: f32[2, -3]):\n  return (%x)", 1, 16, "size -3 of dimension 1 is negative"},
        BadText{"graph g(%x: f32[2, 3] stride=[3, -1]):\n  return (%x)", 1, 13, "stride -1 of dimension 1 is negative"},
        BadText{"graph g(%x: f32[2] offset=-1):\n  return (%x)", 1, 13, "storage offset -1 is negative"},
        BadText{"graph g(%x: f32[3] stride=[4611686018427387904]):\n  return (%x)", 1, 13,
                "sizes [3] with strides [4611686018427387904] reach beyond 2^63 elements"},
        BadText{"graph g(%x: f64[2] offset=2305843009213693951):\n  return (%x)", 1, 13,
                "a f64 tensor of sizes [2] spans more than 2^63 bytes"},
        BadText{"graph g(%x: f32[2]:\n  return (%x)", 1, 19, "expected ')', found ':'"},
        BadText{"graph g(%x: f33[2]):\n  return (%x)", 1, 13, "unknown type 'f33'"},
        BadText{"graph g(%x: f32[2]):\n  %y: f32[2] = aten::sin(%z)\n  return (%y)", 2, 26,
                "use of undefined value %z"},
        BadText{"graph g(%x: f32[2]):\n  %x: f32[2] = aten::sin(%x)\n  return (%x)", 2, 3, "value %x is defined twice"},
        BadText{"graph g(%x: f32[2]):\n  %y: f32[2] = aten::nope(%x)\n  return (%y)", 2, 16,
                "unknown operator 'aten::nope'"},
        BadText{"graph g(%x: f32[2]):\n  %y: f32[2] = aten::add.Tensor(%x, bogus=%x)\n  return (%y)", 2, 37,
                "aten::add.Tensor has no argument named 'bogus'"},
        BadText{"graph g(%x: f32[2]):\n  %y: f32[2] = aten::add.Tensor(%x)\n  return (%y)", 2, 16,
                "aten::add.Tensor: missing argument 'other'"},
        BadText{"graph g(%x: f32[2]):\n  %y: f32[2] = aten::add.Tensor(alpha=2, %x, %x)\n  return (%y)", 2, 42,
                "positional argument after a keyword argument"},
        BadText{"graph g(%x: f32[2]):\n  %y: f32[2] = aten::sum.dim_IntList(%x, [1, %x])\n  return (%y)", 2, 46,
                "aten::sum.dim_IntList argument 'dim': expected an integer list element"},
        BadText{"graph g(%x: f32[2]):\n  %y: f32[2] = aten::gelu(%x, approximate=\"tanh)\n  return (%y)", 2, 43,
                "unterminated string"},
        BadText{"graph g(%x: f32[2]):\n  %y: f32[2] = aten::mul.Scalar(%x, 1e)\n  return (%y)", 2, 37,
                "malformed number: exponent has no digits"},
        BadText{"graph g(%x: f32[2]):\n  %y: f32[2] = aten::mul.Scalar(%x, 99999999999999999999)\n  return (%y)", 2, 37,
                "integer '99999999999999999999' is out of range"},
        BadText{"graph g(%x: f32[2] stride=[1, 1]):\n  return (%x)", 1, 27, "stride has 2 entries, sizes have 1"},
        BadText{"graph g(%x: f32[2]):\n  return (%x) extra", 2, 15,
                "expected end of input after the return statement, found 'extra'"},
        BadText{"graph g(%x: f32[2]):\n  %y: f32[2] = aten::sin(%x)", 2, 29,
                "expected a node or 'return', found end of input"},
        BadText{"graph g(%x: f32[2] device=warp:9):\n  return (%x)", 1, 27, "invalid device 'warp:9'"},
        BadText{"graph g(%x: f32[2]):\n  %y: f32[2] = aten::sin(%x) $\n  return (%y)", 2, 30,
                "unexpected character '$'"},
        BadText{"graph g(%x: f32[2]):\n  %y: f32[2] = constant(\"k\", 2)\n  return (%y)", 2, 28,
                "expected ')', found ','"}));

}  // namespace
}  // namespace aotpipe
