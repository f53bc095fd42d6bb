// graph/convolution_lowering.h: which convolution backwards become matrix products, and that a
// lowered graph computes the gradients the original computes, with the declared layouts; the
// interpreter backends run the lowered graph and say so in their notes.
#include <aotpipe/backend/backend_notes.h>
#include <aotpipe/backend/backends.h>
#include <aotpipe/graph/convolution_lowering.h>
#include <aotpipe/graph/interpreter.h>
#include <aotpipe/graph/parser.h>
#include <aotpipe/graph/verifier.h>

#include <ATen/ATen.h>
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <array>
#include <random>
#include <string>
#include <vector>

#include "test_support.h"

namespace aotpipe {
namespace {

struct ConvCase {
  int64_t n, c, h, w, o;
  std::array<int64_t, 2> stride{1, 1};
  std::array<bool, 3> mask{true, true, false};
  std::string dtype = "f32";
  std::array<int64_t, 2> dilation{1, 1};

  int64_t ho() const { return (h - 1) / stride[0] + 1; }
  int64_t wo() const { return (w - 1) / stride[1] + 1; }
  std::string label() const {
    return fmt::format("{} [{},{},{},{}] -> {} stride {}x{} mask {}{}{}", dtype, n, c, h, w, o, stride[0], stride[1],
                       mask[0], mask[1], mask[2]);
  }
};

std::string py_bool(bool b) { return b ? "True" : "False"; }

// One convolution_backward of a 1x1 kernel; the graph returns the gradients the mask asks for.
Graph conv_backward_graph(const ConvCase& k) {
  const std::string t = k.dtype;
  std::vector<std::string> results, returned;
  const std::array<std::string, 3> metas{fmt::format("{}[{}, {}, {}, {}]", t, k.n, k.c, k.h, k.w),
                                         fmt::format("{}[{}, {}, 1, 1]", t, k.o, k.c), fmt::format("{}[{}]", t, k.o)};
  for (std::size_t i = 0; i < 3; ++i) {
    results.push_back(fmt::format("%g{}: {}", i, k.mask[i] ? metas[i] : "Tensor"));
    if (k.mask[i]) returned.push_back(fmt::format("%g{}", i));
  }
  Graph g = parse_graph(fmt::format(
      R"(
graph conv_bw(%go: {t}[{n}, {o}, {ho}, {wo}], %x: {t}[{n}, {c}, {h}, {w}], %wt: {t}[{o}, {c}, 1, 1]):
  {results} = aten::convolution_backward(%go, %x, %wt, [{o}], [{s0}, {s1}], [0, 0], [{d0}, {d1}], False, [0, 0], 1, [{m0}, {m1}, {m2}]) {{phase=backward}}
  return ({returned})
)",
      fmt::arg("t", t), fmt::arg("n", k.n), fmt::arg("o", k.o), fmt::arg("ho", k.ho()), fmt::arg("wo", k.wo()),
      fmt::arg("c", k.c), fmt::arg("h", k.h), fmt::arg("w", k.w), fmt::arg("results", fmt::join(results, ", ")),
      fmt::arg("s0", k.stride[0]), fmt::arg("s1", k.stride[1]), fmt::arg("d0", k.dilation[0]),
      fmt::arg("d1", k.dilation[1]), fmt::arg("m0", py_bool(k.mask[0])), fmt::arg("m1", py_bool(k.mask[1])),
      fmt::arg("m2", py_bool(k.mask[2])), fmt::arg("returned", fmt::join(returned, ", "))));
  verify(g);
  return g;
}

std::vector<std::string> lowerable_names(const Graph& g) {
  std::vector<std::string> names;
  for (const Node* node : lowerable_convolution_backwards(g)) names.push_back(node->output(0)->name());
  return names;
}

TEST(ConvolutionLowering, OnlyWeightBound1x1KernelsOnTheCpu) {
  // Every call reads the graph's inputs; only %big is a 1x1, one-group, unpadded kernel whose
  // weight (2048x1024) outweighs its activations (8 rows of 1024 + 2048).
  Graph g = parse_graph(R"(
graph convs(%go: f32[2, 2048, 2, 2], %x: f32[2, 1024, 4, 4], %w: f32[2048, 1024, 1, 1], %w3: f32[2048, 1024, 3, 3], %wg: f32[2048, 512, 1, 1], %gop: f32[2, 2048, 3, 3], %gos: f32[2, 16, 32, 32], %xs: f32[2, 16, 32, 32], %ws: f32[16, 16, 1, 1], %gob: bf16[2, 2048, 2, 2], %xb: bf16[2, 1024, 4, 4], %wb: bf16[2048, 1024, 1, 1]):
  %big: f32[2, 1024, 4, 4], %big_w: f32[2048, 1024, 1, 1], %big_b: Tensor = aten::convolution_backward(%go, %x, %w, [0], [2, 2], [0, 0], [1, 1], False, [0, 0], 1, [True, True, False])
  %k3: f32[2, 1024, 4, 4], %k3_w: f32[2048, 1024, 3, 3], %k3_b: Tensor = aten::convolution_backward(%go, %x, %w3, [0], [2, 2], [1, 1], [1, 1], False, [0, 0], 1, [True, True, False])
  %grouped: f32[2, 1024, 4, 4], %grouped_w: f32[2048, 512, 1, 1], %grouped_b: Tensor = aten::convolution_backward(%go, %x, %wg, [0], [2, 2], [0, 0], [1, 1], False, [0, 0], 2, [True, True, False])
  %padded: f32[2, 1024, 4, 4], %padded_w: f32[2048, 1024, 1, 1], %padded_b: Tensor = aten::convolution_backward(%gop, %x, %w, [0], [2, 2], [1, 1], [1, 1], False, [0, 0], 1, [True, True, False])
  %activation_bound: f32[2, 16, 32, 32], %activation_bound_w: f32[16, 16, 1, 1], %activation_bound_b: Tensor = aten::convolution_backward(%gos, %xs, %ws, [0], [1, 1], [0, 0], [1, 1], False, [0, 0], 1, [True, True, False])
  %half: bf16[2, 1024, 4, 4], %half_w: bf16[2048, 1024, 1, 1], %half_b: Tensor = aten::convolution_backward(%gob, %xb, %wb, [0], [2, 2], [0, 0], [1, 1], False, [0, 0], 1, [True, True, False])
  %autocast: f32[2, 1024, 4, 4], %autocast_w: f32[2048, 1024, 1, 1], %autocast_b: Tensor = aten::convolution_backward(%go, %x, %w, [0], [2, 2], [0, 0], [1, 1], False, [0, 0], 1, [True, True, False]) {autocast="cpu,BFloat16"}
  %channels_last: f32[2, 1024, 4, 4] stride=[16384, 1, 4096, 1024], %channels_last_w: f32[2048, 1024, 1, 1], %channels_last_b: Tensor = aten::convolution_backward(%go, %x, %w, [0], [2, 2], [0, 0], [1, 1], False, [0, 0], 1, [True, True, False])
  return (%big, %big_w, %k3, %k3_w, %grouped, %grouped_w, %padded, %padded_w, %activation_bound, %activation_bound_w, %half, %half_w, %autocast, %autocast_w, %channels_last, %channels_last_w)
)");
  EXPECT_EQ(lowerable_names(g), std::vector<std::string>{"big"});
  EXPECT_EQ(lower_convolution_backward(g), 1u);
  verify(g);
  EXPECT_EQ(lowerable_names(g), std::vector<std::string>{});
  // The lowered gradients keep their names; the call is gone.
  ASSERT_NE(g.find_value("big"), nullptr);
  EXPECT_EQ(g.find_value("big")->producer()->qualified_name(), "aten::as_strided_scatter");
  EXPECT_EQ(g.find_value("big_w")->producer()->qualified_name(), "aten::_unsafe_view");
  std::size_t conv_calls = 0;
  for (const Node* node : g.nodes()) conv_calls += node->qualified_name() == "aten::convolution_backward";
  EXPECT_EQ(conv_calls, 7u);
  // A CUDA graph keeps its convolutions (cuDNN's backward is not the one measured slow).
  Graph cuda = parse_graph(R"(
graph on_gpu(%go: f32[2, 2048, 2, 2] device=cuda:0, %x: f32[2, 1024, 4, 4] device=cuda:0, %w: f32[2048, 1024, 1, 1] device=cuda:0):
  %gi: f32[2, 1024, 4, 4] device=cuda:0, %gw: f32[2048, 1024, 1, 1] device=cuda:0, %gb: Tensor = aten::convolution_backward(%go, %x, %w, [0], [2, 2], [0, 0], [1, 1], False, [0, 0], 1, [True, True, False])
  return (%gi, %gw)
)");
  EXPECT_EQ(lowerable_names(cuda), std::vector<std::string>{});
}

// The lowered graph's gradients against convolution_backward's, with check_meta on both (every
// result with its declared sizes, strides and dtype).
void expect_same_gradients(const ConvCase& k, const ConvolutionLoweringOptions& options = {}) {
  SCOPED_TRACE(k.label());
  const Graph original = conv_backward_graph(k);
  Graph lowered = original;
  ASSERT_EQ(lower_convolution_backward(lowered, options), 1u);
  verify(lowered);
  const std::vector<at::Tensor> inputs = testing::make_inputs(original, /*seed=*/k.n * 131 + k.c + k.o);
  const std::vector<at::Tensor> want = Interpreter(original, {.check_meta = true}).run(inputs);
  const std::vector<at::Tensor> got = Interpreter(lowered, {.check_meta = true}).run(inputs);
  ASSERT_EQ(got.size(), want.size());
  const double tolerance = k.dtype == "f64" ? 1e-10 : 1e-4;
  for (std::size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].strides(), want[i].strides()) << "result " << i;
    EXPECT_TRUE(at::allclose(got[i], want[i], tolerance, tolerance))
        << "result " << i << " differs by " << (got[i] - want[i]).abs().max().item<double>();
  }
}

TEST(ConvolutionLowering, SameGradientsAsTheConvolutionKernel) {
  const std::vector<ConvCase> cases{
      {.n = 2, .c = 1024, .h = 4, .w = 4, .o = 2048, .stride = {2, 2}},  // ResNeXt's downsample
      {.n = 2, .c = 256, .h = 2, .w = 2, .o = 512},
      {.n = 1, .c = 64, .h = 5, .w = 7, .o = 128, .stride = {2, 3}},  // odd sizes: the last row and column read
      {.n = 1, .c = 64, .h = 6, .w = 6, .o = 96, .stride = {3, 1}, .dilation = {2, 2}},
      {.n = 2, .c = 512, .h = 1, .w = 1, .o = 512},  // size-1 dimensions: strides as the kernel's
      {.n = 2, .c = 128, .h = 2, .w = 2, .o = 256, .mask = {true, false, false}},
      {.n = 2, .c = 128, .h = 4, .w = 4, .o = 256, .stride = {2, 2}, .mask = {false, true, false}},
      {.n = 2, .c = 128, .h = 2, .w = 2, .o = 256, .mask = {true, true, true}},
      {.n = 2, .c = 96, .h = 3, .w = 3, .o = 160, .stride = {2, 2}, .mask = {false, false, true}},
      {.n = 2, .c = 128, .h = 4, .w = 4, .o = 256, .stride = {2, 2}, .mask = {true, true, true}, .dtype = "f64"},
  };
  for (const ConvCase& k : cases) expect_same_gradients(k);
}

TEST(ConvolutionLowering, RandomShapesLowerToTheSameGradients) {
  // Past the cost rule (every 1x1 kernel lowered), so that odd shapes reach the rewrite: sizes of
  // 1, strides larger than the input, dilations, every mask.
  std::mt19937 rng(36);
  auto pick = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); };
  for (int i = 0; i < 60; ++i) {
    ConvCase k{.n = pick(1, 3), .c = pick(1, 24), .h = pick(1, 9), .w = pick(1, 9), .o = pick(1, 24)};
    k.stride = {pick(1, 4), pick(1, 4)};
    k.dilation = {pick(1, 2), pick(1, 2)};
    const int64_t mask = pick(1, 7);
    k.mask = {(mask & 1) != 0, (mask & 2) != 0, (mask & 4) != 0};
    k.dtype = pick(0, 3) == 0 ? "f64" : "f32";
    expect_same_gradients(k, {.only_where_faster = false});
  }
}

TEST(ConvolutionLowering, InterpreterBackendsRunTheLoweredGraphAndSaySo) {
  const ConvCase k{.n = 2, .c = 1024, .h = 4, .w = 4, .o = 2048, .stride = {2, 2}};
  const Graph g = conv_backward_graph(k);
  const std::vector<at::Tensor> inputs = testing::make_inputs(g, 7);
  const std::vector<at::Tensor> want = Interpreter(g).run(inputs);
  Graph lowered = g;
  lower_convolution_backward(lowered);
  const std::vector<at::Tensor> lowered_result = Interpreter(lowered).run(inputs);
  for (const Compiler& compiler : {backends::interpreter(), backends::planned_interpreter()}) {
    BackendNoteCollector notes;
    const CompiledGraph compiled = compiler(g, {});
    EXPECT_EQ(notes.take(), std::vector<std::string>{"graph 'conv_bw': 1 convolution_backward call of a 1x1 kernel "
                                                     "runs as mm (its weight outweighs its activations)"});
    for (int run = 0; run < 2; ++run) {
      const std::vector<at::Tensor> got = compiled(inputs);
      ASSERT_EQ(got.size(), want.size());
      for (std::size_t i = 0; i < got.size(); ++i) {
        // Bit for bit the lowered graph's: the backend ran it, not the convolution kernel.
        EXPECT_TRUE(at::equal(got[i], lowered_result[i])) << "result " << i << ", run " << run;
        EXPECT_TRUE(at::allclose(got[i], want[i], 1e-4, 1e-4)) << "result " << i << ", run " << run;
      }
    }
  }
  // A graph with nothing to lower says nothing.
  const Graph small = conv_backward_graph({.n = 2, .c = 16, .h = 32, .w = 32, .o = 16});
  BackendNoteCollector notes;
  backends::interpreter()(small, {});
  EXPECT_EQ(notes.take(), std::vector<std::string>{});
}

}  // namespace
}  // namespace aotpipe
