// A CPU LSTM compiles to the kernels eager runs: oneDNN's layer (aten::mkldnn_rnn_layer) and its
// backward, one call per layer and direction, not a dozen cell ops per time step; and it behaves as
// eager does (outputs, the final states, every gradient), in training and in inference, through the
// interpreter and the planned backend. Where eager itself does not take oneDNN (float64, no
// biases), the LSTM is decomposed into cells as PyTorch's AOTAutograd does.
#include <aotpipe/driver/aot_function.h>
#include <aotpipe/backend/backends.h>

#include <eager_check.h>

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <set>
#include <string>

namespace aotpipe {
namespace {

struct LstmCase {
  at::ScalarType dtype = at::kFloat;
  bool has_biases = true;
  bool batch_first = true;
  bool bidirectional = true;
};

constexpr int64_t kBatch = 3, kSteps = 5, kFeatures = 4, kHidden = 6, kLayers = 2;

// Input, h0, c0, then each layer's and direction's weights (ih, hh[, bias ih, bias hh]).
TensorList lstm_inputs(const LstmCase& c) {
  at::manual_seed(0);
  const auto options = at::TensorOptions().dtype(c.dtype);
  const int64_t directions = c.bidirectional ? 2 : 1;
  TensorList in = {
      c.batch_first ? at::randn({kBatch, kSteps, kFeatures}, options) : at::randn({kSteps, kBatch, kFeatures}, options),
      at::randn({kLayers * directions, kBatch, kHidden}, options),
      at::randn({kLayers * directions, kBatch, kHidden}, options)};
  in[0].requires_grad_();
  for (int64_t layer = 0; layer < kLayers; ++layer)
    for (int64_t d = 0; d < directions; ++d) {
      const int64_t features = layer == 0 ? kFeatures : directions * kHidden;
      in.push_back(at::randn({4 * kHidden, features}, options).requires_grad_());
      in.push_back(at::randn({4 * kHidden, kHidden}, options).requires_grad_());
      if (c.has_biases) {
        in.push_back(at::randn({4 * kHidden}, options).requires_grad_());
        in.push_back(at::randn({4 * kHidden}, options).requires_grad_());
      }
    }
  return in;
}

Function lstm_function(const LstmCase& c) {
  return [c](const TensorList& a) {
    const std::vector<at::Tensor> params(a.begin() + 3, a.end());
    auto [out, h, cell] = at::lstm(a[0], {a[1], a[2]}, params, c.has_biases, kLayers, /*dropout=*/0.0,
                                   /*train=*/true, c.bidirectional, c.batch_first);
    return TensorList{out, h, cell};
  };
}

std::multiset<std::string> ops_of(const Graph& g) {
  std::multiset<std::string> ops;
  for (const Node* n : g.nodes()) ops.insert(n->qualified_name());
  return ops;
}

// Returns the compile, for its graphs.
CompileOutput expect_compiled_matches_eager(const LstmCase& c, const AotConfig& config, const std::string& label) {
  const Function fn = lstm_function(c);
  CompileOutput compiled = compile(label, fn, lstm_inputs(c), config);
  testing::expect_matches_eager(
      fn, [&](const TensorList& in) { return compiled.runtime(in); },
      [&] {
        TensorList in;
        for (const at::Tensor& t : lstm_inputs(c)) in.push_back(t.detach().clone().requires_grad_(t.requires_grad()));
        return in;
      },
      label);
  return compiled;
}

TEST(RecurrentKernelsTest, CpuLstmKeepsOneDnnLayersAndTheirBackward) {
  const LstmCase c;
  CompileOutput compiled = compile("lstm_onednn", lstm_function(c), lstm_inputs(c));
  ASSERT_TRUE(compiled.state()->partition);
  const auto forward = ops_of(compiled.state()->partition->forward);
  const auto backward = ops_of(compiled.state()->partition->backward);
  EXPECT_EQ(forward.count("aten::mkldnn_rnn_layer"), 4u) << "one per layer and direction";
  EXPECT_EQ(backward.count("aten::mkldnn_rnn_layer_backward"), 4u);
  EXPECT_EQ(forward.count("aten::sigmoid"), 0u) << "the LSTM was decomposed into cells";
  EXPECT_EQ(backward.count("aten::mkldnn_rnn_layer"), 0u) << "the partitioner recomputed the layer in the backward";
}

TEST(RecurrentKernelsTest, OneDnnLstmMatchesEagerInTraining) {
  expect_compiled_matches_eager({}, {}, "lstm_onednn_batch_first");
  expect_compiled_matches_eager({.batch_first = false, .bidirectional = false}, {}, "lstm_onednn_time_first");
}

TEST(RecurrentKernelsTest, OneDnnLstmMatchesEagerThroughThePlannedBackend) {
  AotConfig config;
  config.fw_compiler = backends::planned_interpreter();
  expect_compiled_matches_eager({}, config, "lstm_onednn_planned");
}

// Without grad the layer makes no workspace (its kernel decides by grad mode): the inference
// graph runs it as eager does, and a training compile called under no_grad still runs.
TEST(RecurrentKernelsTest, OneDnnLstmRunsWithoutGrad) {
  const LstmCase c;
  const Function fn = lstm_function(c);
  TensorList inputs = lstm_inputs(c);
  const TensorList eager = fn(inputs);
  CompileOutput training = compile("lstm_onednn_training", fn, inputs);
  at::NoGradGuard no_grad;
  CompileOutput inference = compile("lstm_onednn_inference", fn, inputs);
  ASSERT_TRUE(inference.state()->traced.inference_graph);
  EXPECT_EQ(ops_of(*inference.state()->traced.inference_graph).count("aten::mkldnn_rnn_layer"), 4u);
  for (CompileOutput* out : {&inference, &training}) {
    const TensorList got = out->runtime(inputs);
    ASSERT_EQ(got.size(), eager.size());
    for (std::size_t k = 0; k < got.size(); ++k) EXPECT_TRUE(at::allclose(got[k], eager[k], 1e-5, 1e-6)) << k;
  }
}

// Eager decomposes these itself (no oneDNN for float64; aotpipe keeps the layer only with biases):
// cells, as PyTorch's AOTAutograd traces them, and eager's results.
TEST(RecurrentKernelsTest, LstmsEagerDoesNotRunOnOneDnnAreDecomposed) {
  for (const LstmCase& c : {LstmCase{.dtype = at::kDouble}, LstmCase{.has_biases = false}}) {
    const std::string label = c.dtype == at::kDouble ? "lstm_float64" : "lstm_no_biases";
    CompileOutput compiled = expect_compiled_matches_eager(c, {}, label);
    ASSERT_TRUE(compiled.state()->partition) << label;
    const auto forward = ops_of(compiled.state()->partition->forward);
    EXPECT_EQ(forward.count("aten::mkldnn_rnn_layer"), 0u) << label;
    EXPECT_GT(forward.count("aten::sigmoid"), 0u) << label;
  }
}

}  // namespace
}  // namespace aotpipe
