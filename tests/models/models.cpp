#include "models.h"

#include <ATen/ATen.h>

#include <cmath>

namespace aotpipe::testing {
namespace {

using at::Tensor;

// A parameter: a leaf that requires grad, scaled so activations stay in a well-conditioned range.
Tensor param(at::IntArrayRef sizes, double scale = 0.3) { return (at::randn(sizes) * scale).requires_grad_(true); }
Tensor data(at::IntArrayRef sizes) { return at::randn(sizes); }

// ---- MLP: three Linear layers with ReLU between them -------------------------------------------
// inputs: x, (w, b) x 3
TensorList mlp(const TensorList& a) {
  Tensor h = at::relu(at::linear(a[0], a[1], a[2]));
  h = at::relu(at::linear(h, a[3], a[4]));
  return {at::linear(h, a[5], a[6])};
}
TensorList mlp_inputs() {
  return {data({16, 32}), param({64, 32}), param({64}), param({64, 64}), param({64}), param({10, 64}), param({10})};
}

// ---- Conv net: Conv2d -> BatchNorm2d (training) -> ReLU -> global average pool -> Linear -------
// inputs: x, conv_w, conv_b, bn_w, bn_b, running_mean, running_var, num_batches_tracked, fc_w, fc_b
// As torch.nn.BatchNorm2d.forward in training mode: the running statistics are updated in place
// by batch_norm and num_batches_tracked by add_.
constexpr std::size_t kRunningMean = 5, kRunningVar = 6, kNumBatchesTracked = 7;
TensorList conv_bn_net(const TensorList& a) {
  Tensor h = at::conv2d(a[0], a[1], a[2], /*stride=*/1, /*padding=*/1);
  a[kNumBatchesTracked].add_(1);
  h = at::batch_norm(h, a[3], a[4], a[kRunningMean], a[kRunningVar], /*training=*/true, /*momentum=*/0.1,
                     /*eps=*/1e-5, /*cudnn_enabled=*/false);
  h = at::relu(h);
  h = at::adaptive_avg_pool2d(h, {1, 1}).flatten(1);
  return {at::linear(h, a[8], a[9])};
}
TensorList conv_bn_inputs() {
  return {data({4, 3, 8, 8}), param({8, 3, 3, 3}), param({8}),    (1 + param({8}, 0.1)).detach().requires_grad_(true),
          param({8}),         at::zeros({8}),      at::ones({8}), at::zeros({}, at::kLong),
          param({5, 8}),      param({5})};
}

// ---- Transformer block (pre-LN): causal multi-head self-attention and a GELU FFN, residuals ---
// inputs: x [B, T, C], ln1_w, ln1_b, w_qkv, b_qkv, w_o, b_o, ln2_w, ln2_b, w_1, b_1, w_2, b_2
constexpr int64_t kBatch = 2, kTokens = 5, kChannels = 16, kHeads = 4, kHeadDim = kChannels / kHeads;
TensorList transformer_block(const TensorList& a) {
  const Tensor& x = a[0];
  Tensor h = at::layer_norm(x, {kChannels}, a[1], a[2]);
  auto qkv = at::linear(h, a[3], a[4]).chunk(3, /*dim=*/-1);
  auto heads = [](const Tensor& t) { return t.view({kBatch, kTokens, kHeads, kHeadDim}).transpose(1, 2); };
  Tensor q = heads(qkv[0]), k = heads(qkv[1]), v = heads(qkv[2]);
  Tensor scores = q.matmul(k.transpose(-2, -1)) / std::sqrt(static_cast<double>(kHeadDim));
  Tensor causal = at::ones({kTokens, kTokens}, at::kBool).triu(1);
  Tensor attn = at::softmax(scores.masked_fill(causal, -INFINITY), -1);
  Tensor context = attn.matmul(v).transpose(1, 2).reshape({kBatch, kTokens, kChannels});
  Tensor y = x + at::linear(context, a[5], a[6]);
  Tensor ffn = at::linear(at::gelu(at::linear(at::layer_norm(y, {kChannels}, a[7], a[8]), a[9], a[10])), a[11], a[12]);
  return {y + ffn};
}
TensorList transformer_inputs() {
  auto ones_param = [] { return at::ones({kChannels}).requires_grad_(true); };
  return {param({kBatch, kTokens, kChannels}, 1.0),
          ones_param(),
          param({kChannels}, 0.1),
          param({3 * kChannels, kChannels}),
          param({3 * kChannels}, 0.1),
          param({kChannels, kChannels}),
          param({kChannels}, 0.1),
          ones_param(),
          param({kChannels}, 0.1),
          param({4 * kChannels, kChannels}),
          param({4 * kChannels}, 0.1),
          param({kChannels, 4 * kChannels}),
          param({kChannels}, 0.1)};
}

// ---- LSTM cell -----------------------------------------------------------------------------------
// inputs: xs [steps, N, I], h0, c0, w_ih, w_hh, b_ih, b_hh
constexpr int64_t kSteps = 3, kLstmBatch = 3, kLstmIn = 8, kLstmHidden = 6;
TensorList lstm_aten_unrolled(const TensorList& a) {
  Tensor h = a[1], c = a[2];
  for (int64_t t = 0; t < kSteps; ++t) std::tie(h, c) = at::lstm_cell(a[0][t], {h, c}, a[3], a[4], a[5], a[6]);
  return {h, c};
}
// The same cell written out (torch.nn.LSTMCell's equations), one step.
TensorList lstm_written_out(const TensorList& a) {
  Tensor gates = at::linear(a[0][0], a[3], a[5]) + at::linear(a[1], a[4], a[6]);
  auto g = gates.chunk(4, /*dim=*/1);
  Tensor c = at::sigmoid(g[1]) * a[2] + at::sigmoid(g[0]) * at::tanh(g[2]);
  Tensor h = at::sigmoid(g[3]) * at::tanh(c);
  return {h, c};
}
TensorList lstm_inputs() {
  return {param({kSteps, kLstmBatch, kLstmIn}, 1.0),
          param({kLstmBatch, kLstmHidden}),
          param({kLstmBatch, kLstmHidden}),
          param({4 * kLstmHidden, kLstmIn}),
          param({4 * kLstmHidden, kLstmHidden}),
          param({4 * kLstmHidden}, 0.1),
          param({4 * kLstmHidden}, 0.1)};
}

std::vector<ModelCase> build() {
  return {
      {"mlp_3_layers", mlp, mlp_inputs, {}},
      {"conv_batchnorm_train", conv_bn_net, conv_bn_inputs, {kRunningMean, kRunningVar, kNumBatchesTracked}},
      {"transformer_block", transformer_block, transformer_inputs, {}},
      {"lstm_cell_aten_3_steps", lstm_aten_unrolled, lstm_inputs, {}},
      {"lstm_cell_written_out", lstm_written_out, lstm_inputs, {}},
  };
}

}  // namespace

const std::vector<ModelCase>& model_cases() {
  static const std::vector<ModelCase> cases = build();
  return cases;
}

}  // namespace aotpipe::testing
