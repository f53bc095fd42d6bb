// The interpreter against eager ATen: graphs written in the text form, run on real tensors,
// compared with the same computation called directly.
#include <aotpipe/graph/interpreter.h>
#include <aotpipe/graph/parser.h>
#include <aotpipe/graph/verifier.h>

#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <torch/library.h>

#include <atomic>

#include "test_support.h"

namespace aotpipe {
namespace {

using testing::make_inputs;
using testing::tensor_lists_close;

std::vector<at::Tensor> run(const std::string& text, const std::vector<at::Tensor>& inputs) {
  Graph g = parse_graph(text);
  verify(g);
  return Interpreter(g).run(inputs);
}

TEST(Interpreter, PointwiseChain) {
  const char* text = R"(
graph pointwise(%x: f32[4, 5], %y: f32[4, 5]):
  %a: f32[4, 5] = aten::mul.Tensor(%x, %y)
  %b: f32[4, 5] = aten::add.Tensor(%a, %x, alpha=0.5)
  %c: f32[4, 5] = aten::relu(%b)
  %d: f32[4, 5] = aten::mul.Scalar(%c, 3)
  %e: f32[4, 5] = aten::where.self(%f, %d, %y)
  %f: b8[4, 5] = aten::gt.Scalar(%x, 0.0)
  return (%e)
)";
  // %f is used before its definition: the parser rejects the name.
  EXPECT_THROW(parse_graph(text), ParseError);
  std::string fixed = R"(
graph pointwise(%x: f32[4, 5], %y: f32[4, 5]):
  %a: f32[4, 5] = aten::mul.Tensor(%x, %y)
  %b: f32[4, 5] = aten::add.Tensor(%a, %x, alpha=0.5)
  %c: f32[4, 5] = aten::relu(%b)
  %d: f32[4, 5] = aten::mul.Scalar(%c, 3)
  %f: b8[4, 5] = aten::gt.Scalar(%x, 0.0)
  %e: f32[4, 5] = aten::where.self(%f, %d, %y)
  %s: f32[4, 5] = aten::sigmoid(%e)
  return (%e, %s)
)";
  auto in = make_inputs(parse_graph(fixed));
  auto& x = in[0];
  auto& y = in[1];
  auto e = at::where(x > 0.0, at::relu(x * y + 0.5 * x) * 3, y);
  EXPECT_TRUE(tensor_lists_close({e, e.sigmoid()}, run(fixed, in)));
}

TEST(Interpreter, ReductionsAndMatmul) {
  std::string text = R"(
graph reduce(%x: f32[8, 16], %w: f32[16, 4], %b: f32[4]):
  %mm: f32[8, 4] = aten::mm(%x, %w)
  %lin: f32[8, 4] = aten::addmm(%b, %x, %w)
  %s: f32[8] = aten::sum.dim_IntList(%lin, [1], True)
  %m: f32[4] = aten::mean.dim(%mm, [0])
  %amax: f32[8] = aten::amax(%x, [1])
  %lse: f32[8] = aten::logsumexp(%x, [1])
  %sm: f32[8, 16] = aten::_softmax(%x, -1, False)
  %bmm: f32[2, 4, 4] = aten::bmm(%r1, %r2)
  return (%mm, %lin, %s, %m, %amax, %lse, %sm)
)";
  EXPECT_THROW(parse_graph(text), ParseError);  // %r1 undefined
  text = R"(
graph reduce(%x: f32[8, 16], %w: f32[16, 4], %b: f32[4]):
  %mm: f32[8, 4] = aten::mm(%x, %w)
  %lin: f32[8, 4] = aten::addmm(%b, %x, %w)
  %s: f32[8, 1] = aten::sum.dim_IntList(%lin, [1], True)
  %m: f32[4] = aten::mean.dim(%mm, [0])
  %amax: f32[8] = aten::amax(%x, [1])
  %lse: f32[8] = aten::logsumexp(%x, [1])
  %sm: f32[8, 16] = aten::_softmax(%x, -1, False)
  %r1: f32[2, 4, 16] = aten::view(%x, [2, 4, 16])
  %r2: f32[2, 16, 4] = aten::expand(%w, [2, 16, 4])
  %bmm: f32[2, 4, 4] = aten::bmm(%r1, %r2)
  %tot: f32[] = aten::sum(%bmm, dtype=torch.float64)
  return (%mm, %lin, %s, %m, %amax, %lse, %sm, %bmm, %tot)
)";
  auto in = make_inputs(parse_graph(text));
  auto &x = in[0], &w = in[1], &b = in[2];
  auto mm = at::mm(x, w);
  auto bmm = at::bmm(x.view({2, 4, 16}), w.expand({2, 16, 4}));
  std::vector<at::Tensor> expected{mm,
                                   at::addmm(b, x, w),
                                   at::addmm(b, x, w).sum({1}, true),
                                   mm.mean({0}),
                                   x.amax({1}),
                                   x.logsumexp({1}),
                                   at::_softmax(x, -1, false),
                                   bmm,
                                   bmm.sum(at::kDouble)};
  EXPECT_TRUE(tensor_lists_close(expected, run(text, in), 1e-4, 1e-5));
}

TEST(Interpreter, ViewsKeepAliasingWithTheirBase) {
  std::string text = R"(
graph views(%x: f32[4, 6]):
  %t: f32[6, 4] stride=[1, 6] = aten::t(%x)
  %v: f32[24] = aten::view(%x, [24])
  %s: f32[4, 3] stride=[6, 2] offset=1 = aten::slice.Tensor(%x, 1, 1, 6, 2)
  %u: f32[1, 4, 6] = aten::unsqueeze(%x, 0)
  %p: f32[6, 4] stride=[1, 6] = aten::permute(%x, [1, 0])
  %d: f32[4] stride=[7] = aten::diagonal(%x)
  %st: f32[2, 6] offset=12 = aten::select.int(%r, 0, 1)
  %r: f32[2, 2, 6] = aten::reshape(%x, [2, 2, 6])
  return (%t, %v, %s, %u, %p, %d)
)";
  EXPECT_THROW(parse_graph(text), ParseError);
  text.replace(text.find("  %st"), text.find("  return") - text.find("  %st"), "");
  auto in = make_inputs(parse_graph(text));
  auto out = run(text, in);
  auto& x = in[0];
  EXPECT_TRUE(tensor_lists_close(
      {x.t(), x.view({24}), x.slice(1, 1, 6, 2), x.unsqueeze(0), x.permute({1, 0}), x.diagonal()}, out));
  for (std::size_t i = 0; i < out.size(); ++i) { EXPECT_TRUE(out[i].is_alias_of(x)) << "output " << i; }
  EXPECT_EQ(out[2].storage_offset(), 1);
  EXPECT_EQ(out[2].strides(), (std::vector<int64_t>{6, 2}));
}

TEST(Interpreter, MultiOutputOps) {
  std::string text = R"(
graph multi(%x: f32[8, 3, 5, 5], %w: f32[3], %b: f32[3], %rm: f32[3], %rv: f32[3]):
  %var: f32[8, 3, 5], %mean: f32[8, 3, 5] = aten::var_mean.correction(%x, [3], correction=1, keepdim=False)
  %out: f32[8, 3, 5, 5], %save_mean: f32[3], %save_invstd: f32[3] = aten::native_batch_norm(%x, %w, %b, %rm, %rv, True, 0.1, 1e-05)
  %c0: f32[8, 1, 5, 5], %c1: f32[8, 1, 5, 5], %c2: f32[8, 1, 5, 5] = aten::split.Tensor(%x, 1, 1)
  %mx: f32[8, 5, 5], %idx: i64[8, 5, 5] = aten::max.dim(%x, 1)
  return (%var, %mean, %out, %save_mean, %save_invstd, %c2, %mx, %idx)
)";
  Graph g = parse_graph(text);
  auto in = make_inputs(g);
  in[4] = in[4].abs() + 0.5;  // running variance > 0
  auto rm_eager = in[3].clone();
  auto rv_eager = in[4].clone();
  auto [var, mean] = at::var_mean(in[0], {3}, 1, false);
  auto [bn, sm, si] = at::native_batch_norm(in[0], in[1], in[2], rm_eager, rv_eager, true, 0.1, 1e-5);
  auto chunks = in[0].split(1, 1);
  auto [mx, idx] = in[0].max(1);
  auto rm_graph = in[3];
  auto rv_graph = in[4];
  auto out = Interpreter(g).run(in);
  EXPECT_TRUE(tensor_lists_close({var, mean, bn, sm, si, chunks[2], mx, idx}, out, 1e-4, 1e-5));
  // native_batch_norm updates the running statistics in place, like eager.
  EXPECT_TRUE(testing::tensors_close(rm_eager, rm_graph));
  EXPECT_TRUE(testing::tensors_close(rv_eager, rv_graph));
}

TEST(Interpreter, TensorListArgumentsAndOptionalLists) {
  std::string text = R"(
graph lists(%a: f32[2, 3], %b: f32[2, 3], %i: i64[2]):
  %cat: f32[4, 3] = aten::cat([%a, %b])
  %stk: f32[2, 3, 3] = aten::stack([%a, %b, %a], 1)
  %ix: f32[2, 3] = aten::index.Tensor(%cat, [%i])
  %ix2: f32[4, 2] = aten::index.Tensor(%cat, [None, %i])
  return (%cat, %stk, %ix, %ix2)
)";
  Graph g = parse_graph(text);
  auto in = make_inputs(g);
  in[2] = at::tensor({2, 0}, at::kLong);
  auto cat = at::cat({in[0], in[1]});
  std::vector<at::Tensor> expected{cat, at::stack({in[0], in[1], in[0]}, 1), cat.index({in[2]}),
                                   cat.index({at::indexing::Slice(), in[2]})};
  EXPECT_TRUE(tensor_lists_close(expected, Interpreter(g, {.check_meta = true}).run(in)));
}

TEST(Interpreter, CheckMetaNamesTheValueWhoseShapeIsWrong) {
  Graph g = parse_graph(R"(
graph wrong(%x: f32[2, 3]):
  %t: f32[2, 3] = aten::t(%x)
  return (%t)
)");
  auto in = make_inputs(g);
  EXPECT_NO_THROW(Interpreter(g).run(in));
  try {
    Interpreter(g, {.check_meta = true}).run(in);
    FAIL() << "expected a GraphError";
  } catch (const GraphError& e) {
    EXPECT_NE(std::string(e.what()).find("%t = aten::t produced f32[3, 2] stride=[1, 3], declared f32[2, 3]"),
              std::string::npos)
        << e.what();
  }
}

TEST(Interpreter, ErrorsNameGraphNodeAndOp) {
  Graph g = parse_graph(R"(
graph bad(%x: f32[2, 3], %y: f32[4, 5]):
  %m: f32[2, 5] = aten::mm(%x, %y)
  return (%m)
)");
  auto in = make_inputs(g);
  try {
    Interpreter(g).run(in);
    FAIL() << "expected a GraphError";
  } catch (const GraphError& e) {
    EXPECT_NE(std::string(e.what()).find("interpreter: graph 'bad': %m = aten::mm failed:"), std::string::npos)
        << e.what();
  }
  try {
    Interpreter(g).run({in[0]});
    FAIL() << "expected a GraphError";
  } catch (const GraphError& e) { EXPECT_STREQ(e.what(), "interpreter: graph 'bad' takes 2 inputs, got 1"); }
}

TEST(Interpreter, ReleasesValuesAfterTheirLastUse) {
  // The input is moved in and each intermediate handed to its last reader: nothing keeps
  // the input alive once the first op has run, so the caller's tensor is the only owner left.
  Graph g = parse_graph(R"(
graph chain(%x: f32[16]):
  %a: f32[16] = aten::sin(%x)
  %b: f32[16] = aten::cos(%a)
  %c: f32[16] = aten::exp(%b)
  return (%c, %x)
)");
  Interpreter interp(g);
  at::Tensor x = at::randn({16});
  auto out = interp.run({x});
  EXPECT_TRUE(out[1].is_same(x));
  EXPECT_TRUE(testing::tensors_close(x.sin().cos().exp(), out[0]));
  // Given by move and not among the outputs, the input dies inside the run.
  Graph g2 = parse_graph(R"(
graph consume(%x: f32[16]):
  %a: f32[16] = aten::sin(%x)
  return (%a)
)");
  at::Tensor y = at::randn({16});
  c10::weak_intrusive_ptr<c10::TensorImpl> weak(y.getIntrusivePtr());
  auto expected = y.sin();
  auto result = Interpreter(g2).run({std::move(y)});
  EXPECT_TRUE(weak.expired());
  EXPECT_TRUE(testing::tensors_close(expected, result[0]));
}

TEST(Interpreter, SameOutputTwiceAndInputAsOutput) {
  Graph g = parse_graph(R"(
graph twice(%x: f32[3], %unused: f32[3]):
  %a: f32[3] = aten::neg(%x)
  return (%a, %a, %x)
)");
  at::Tensor x = at::randn({3});
  auto out = Interpreter(g).run({x, at::zeros({3})});
  ASSERT_EQ(out.size(), 3u);
  EXPECT_TRUE(out[0].is_same(out[1]));
  EXPECT_TRUE(out[2].is_same(x));
}

// A kernel taking a plain `Tensor` that may be undefined, as the CUDA attention backwards take
// the forward's absent attn_bias.
TORCH_LIBRARY_FRAGMENT(aotpipe_interpreter_test, m) {
  m.def("plus_if_defined(Tensor x, Tensor maybe) -> Tensor",
        [](const at::Tensor& x, const at::Tensor& maybe) { return maybe.defined() ? x + maybe : x * 2; });
}

TEST(Interpreter, NoneForAPlainTensorParameterIsAnUndefinedTensor) {
  Graph g = parse_graph(R"(
graph absent(%x: f32[3]):
  %y: f32[3] = aotpipe_interpreter_test::plus_if_defined(%x, None)
  return (%y)
)");
  at::Tensor x = at::randn({3});
  EXPECT_TRUE(at::allclose(Interpreter(g).run({x})[0], x * 2));
}

// A fresh tensor whose address the test can see: where a re-inplaced op wrote.
std::atomic<const void*> last_fresh{nullptr};
TORCH_LIBRARY_FRAGMENT(aotpipe_interpreter_test, m) {
  m.def("fresh(Tensor x) -> Tensor", [](const at::Tensor& x) {
    at::Tensor copy = x.clone();
    last_fresh = copy.const_data_ptr();
    return copy;
  });
}

Interpreter reinplacing(const Graph& g) { return Interpreter(g, InterpreterOptions{.reinplace = true}); }

TEST(Interpreter, ReinplacesPointwiseOpsIntoIntermediatesThatDie) {
  Graph g = parse_graph(R"(
graph chain(%x: f32[64], %y: f32[64]):
  %a: f32[64] = aotpipe_interpreter_test::fresh(%x)
  %b: f32[64] = aten::add.Tensor(%a, %y, alpha=2)
  %c: f32[64] = aten::relu(%b)
  %d: f32[64] = aten::mul.Tensor(%y, %c)
  return (%d)
)");
  // add writes into %a, relu into %b and mul, commutative, into its `other` %c.
  EXPECT_EQ(reinplacing(g).num_reinplaceable(), 3u);
  EXPECT_EQ(Interpreter(g).num_reinplaceable(), 0u);
  at::Tensor x = at::randn({64}), y = at::randn({64});
  const at::Tensor expected = y * at::relu(x + 2 * y);
  at::Tensor d = reinplacing(g).run({x, y})[0];
  EXPECT_TRUE(testing::tensors_close(expected, d));
  EXPECT_EQ(d.const_data_ptr(), last_fresh.load()) << "the chain ran in the fresh tensor's memory";
  // Without the option every op allocates its result.
  EXPECT_NE(Interpreter(g).run({x, y})[0].const_data_ptr(), last_fresh.load());
  EXPECT_TRUE(testing::tensors_close(x, x.clone())) << "inputs are never written";
}

TEST(Interpreter, NeverReinplacesWhatSomethingElseCanSee) {
  // Statically excluded: an input, a value read again later, a view of an input, the `other` of a
  // non-commutative op, a broadcast, another dtype.
  Graph g = parse_graph(R"(
graph excluded(%x: f32[8], %r: f32[1]):
  %a: f32[8] = aten::add.Scalar(%x, 1)
  %b: f32[8] = aten::mul.Scalar(%a, 2)
  %v: f32[8] = aten::view(%x, [8])
  %c: f32[8] = aten::sub.Tensor(%v, %b)
  %w: f32[1] = aotpipe_interpreter_test::fresh(%r)
  %e: f32[8] = aten::add.Tensor(%w, %c, alpha=3)
  %i: i64[8] = aten::_to_copy(%e, dtype=4)
  %h: f32[8] = aten::div.Scalar(%i, 2.0)
  return (%h, %a)
)");
  EXPECT_EQ(reinplacing(g).num_reinplaceable(), 0u);
  at::Tensor x = at::randn({8}), r = at::randn({1});
  const at::Tensor x_before = x.clone();
  const auto out = reinplacing(g).run({x, r});
  const at::Tensor a = x_before + 1;
  EXPECT_TRUE(testing::tensor_lists_close({at::div((r + 3 * (x_before - 2 * a)).to(at::kLong), 2.0), a}, out));
  EXPECT_TRUE(at::equal(x, x_before));
}

TEST(Interpreter, ReinplacingChecksAtRunTimeThatNothingSharesTheStorage) {
  // Statically %b may be written by the add: fresh, read there for the last time. At run time a
  // view of it is still alive (an output), so the add must allocate, or %v would change.
  Graph g = parse_graph(R"(
graph shared(%x: f32[4, 4]):
  %b: f32[4, 4] = aotpipe_interpreter_test::fresh(%x)
  %v: f32[4, 4] stride=[1, 4] = aten::t(%b)
  %c: f32[4, 4] = aten::add.Scalar(%b, 1)
  return (%c, %v)
)");
  Interpreter interp = reinplacing(g);
  EXPECT_EQ(interp.num_reinplaceable(), 1u);
  at::Tensor x = at::randn({4, 4});
  const auto out = interp.run({x});
  EXPECT_TRUE(testing::tensors_close(x + 1, out[0]));
  EXPECT_TRUE(testing::tensors_close(x.t(), out[1])) << "the view kept the value it had";
  EXPECT_NE(out[0].const_data_ptr(), out[1].const_data_ptr());
  // _unsafe_view's schema hides its alias: the storage count catches it.
  Graph hidden = parse_graph(R"(
graph hidden(%x: f32[4, 4]):
  %b: f32[4, 4] = aotpipe_interpreter_test::fresh(%x)
  %u: f32[16] = aten::_unsafe_view(%b, [16])
  %c: f32[16] = aten::add.Scalar(%u, 1)
  return (%c, %b)
)");
  const auto out2 = reinplacing(hidden).run({x});
  EXPECT_TRUE(testing::tensors_close(x, out2[1])) << "the base kept its value";
  EXPECT_TRUE(testing::tensors_close(x.reshape({16}) + 1, out2[0]));
}

TEST(Interpreter, ConcurrentRunsOfOneInterpreter) {
  Graph g = parse_graph(R"(
graph par(%x: f32[64, 64]):
  %a: f32[64, 64] = aten::mm(%x, %x)
  %b: f32[64, 64] = aten::tanh(%a)
  return (%b)
)");
  testing::expect_concurrent_runs_match(
      Interpreter(g), [](const at::Tensor& x) { return at::mm(x, x).tanh(); }, 64);
}

}  // namespace
}  // namespace aotpipe
