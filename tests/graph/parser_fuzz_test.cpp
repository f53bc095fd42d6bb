// Malformed text never crashes the parser: a bounded, seeded random mutation run over valid
// graph texts. Every input either parses (and then prints stably and verifies without
// crashing) or throws ParseError; no other exception, no crash (also run under ASan).
#include <aotpipe/graph/parser.h>
#include <aotpipe/graph/verifier.h>

#include <gtest/gtest.h>

#include <random>

#include "test_support.h"

namespace aotpipe {
namespace {

std::string mutate(std::string text, std::mt19937_64& rng) {
  static const std::vector<std::string> tokens{"%",
                                               "%x",
                                               "(",
                                               ")",
                                               "[",
                                               "]",
                                               "{",
                                               "}",
                                               ",",
                                               ":",
                                               "=",
                                               "\"",
                                               "\\",
                                               "#",
                                               "aten::",
                                               "aten::mul.Tensor",
                                               "None",
                                               "True",
                                               "torch.float32",
                                               "device(",
                                               "-",
                                               "1e",
                                               "inf",
                                               "nan",
                                               "9999999999999999999999",
                                               "-0",
                                               ".",
                                               "\n",
                                               " ",
                                               "f32[",
                                               "stride=[",
                                               "offset=",
                                               "requires_grad",
                                               "return",
                                               "graph",
                                               "constant(",
                                               "\x00",
                                               "\xff",
                                               "\xc3\xa9"};
  auto pick = [&](std::size_t n) { return n == 0 ? 0 : static_cast<std::size_t>(rng() % n); };
  int edits = 1 + static_cast<int>(pick(4));
  for (int e = 0; e < edits; ++e) {
    std::size_t pos = pick(text.size() + 1);
    switch (pick(5)) {
      case 0: text.insert(pos, tokens[pick(tokens.size())]); break;
      case 1:
        if (!text.empty()) text.erase(pick(text.size()), 1 + pick(8));
        break;
      case 2: text.resize(pick(text.size() + 1)); break;  // truncation
      case 3:
        if (!text.empty()) text[pick(text.size())] = static_cast<char>(pick(256));
        break;
      default:
        if (!text.empty()) {
          auto a = pick(text.size());
          text.insert(pos, text.substr(a, pick(20)));
        }
        break;
    }
  }
  return text;
}

TEST(ParserFuzz, RandomMutationsNeverCrash) {
  std::vector<std::string> corpus;
  for (uint64_t seed = 0; seed < 20; ++seed) corpus.push_back(testing::random_graph(seed, 12).to_string());
  std::mt19937_64 rng(12345);
  int parsed = 0, rejected = 0;
  constexpr int kIterations = 20000;
  for (int i = 0; i < kIterations; ++i) {
    std::string text = mutate(corpus[static_cast<std::size_t>(i) % corpus.size()], rng);
    try {
      Graph g = parse_graph(text);
      ++parsed;
      std::string printed = g.to_string();
      ASSERT_EQ(parse_graph(printed).to_string(), printed) << "unstable print of:\n" << text;
      (void)verify_issues(g);
    } catch (const ParseError&) { ++rejected; } catch (const std::exception& e) {
      FAIL() << "unexpected exception " << typeid(e).name() << ": " << e.what() << "\non input:\n" << text;
    }
  }
  EXPECT_EQ(parsed + rejected, kIterations);
  EXPECT_GT(rejected, kIterations / 2);  // the mutations do break most texts
  EXPECT_GT(parsed, 0);                  // and some survive, exercising print/verify on odd graphs
}

}  // namespace
}  // namespace aotpipe
