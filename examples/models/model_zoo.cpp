#include "model_zoo.h"

#include <aotpipe/graph/example_tensor.h>

#include <ATen/ATen.h>

#include <cmath>
#include <utility>

namespace aotpipe::zoo {
namespace {

using at::Tensor;

// The inputs of a model, described in order; every index is remembered by the caller.
class InputList {
 public:
  explicit InputList(c10::Device device) : device_(device) {}
  // An activation (requires grad: the stage before it is trained too), optionally channels_last.
  std::size_t activation(std::vector<int64_t> sizes, bool channels_last = false) {
    return add(std::move(sizes), c10::kFloat, true, channels_last);
  }
  std::size_t param(std::vector<int64_t> sizes, bool channels_last = false) {
    return add(std::move(sizes), c10::kFloat, true, channels_last);
  }
  std::size_t buffer(std::vector<int64_t> sizes, c10::ScalarType dtype = c10::kFloat) {
    return add(std::move(sizes), dtype, false, false);
  }
  std::vector<TensorMeta> take() { return std::move(metas_); }

 private:
  std::size_t add(std::vector<int64_t> sizes, c10::ScalarType dtype, bool requires_grad, bool channels_last) {
    TensorMeta meta = TensorMeta::contiguous(std::move(sizes), dtype, device_, requires_grad);
    if (channels_last) {  // NCHW sizes, NHWC memory
      const auto& s = meta.sizes;
      meta.strides = {s[1] * s[2] * s[3], 1, s[1] * s[3], s[1]};
    }
    metas_.push_back(std::move(meta));
    return metas_.size() - 1;
  }
  c10::Device device_;
  std::vector<TensorMeta> metas_;
};

// A BatchNorm2d in training mode: weight, bias, running mean, running variance.
struct BatchNormInputs {
  std::size_t weight, bias, mean, var;
  BatchNormInputs(InputList& in, int64_t channels)
      : weight(in.param({channels})),
        bias(in.param({channels})),
        mean(in.buffer({channels})),
        var(in.buffer({channels})) {}
  Tensor operator()(const TensorList& a, const Tensor& x) const {
    return at::batch_norm(x, a[weight], a[bias], a[mean], a[var], /*training=*/true, /*momentum=*/0.1, /*eps=*/1e-5,
                          /*cudnn_enabled=*/true);
  }
};

struct LinearInputs {
  std::size_t weight, bias;
  LinearInputs(InputList& in, int64_t in_features, int64_t out_features)
      : weight(in.param({out_features, in_features})), bias(in.param({out_features})) {}
  Tensor operator()(const TensorList& a, const Tensor& x) const { return at::linear(x, a[weight], a[bias]); }
};

struct LayerNormInputs {
  std::size_t weight, bias;
  int64_t width;
  LayerNormInputs(InputList& in, int64_t features)
      : weight(in.param({features})), bias(in.param({features})), width(features) {}
  Tensor operator()(const TensorList& a, const Tensor& x) const {
    return at::layer_norm(x, {width}, a[weight], a[bias]);
  }
};

// [B, T, heads * head_dim] -> [B, heads, T, head_dim]
Tensor split_heads(const Tensor& x, int64_t heads) {
  const int64_t head_dim = x.size(-1) / heads;
  return x.view({x.size(0), x.size(1), heads, head_dim}).transpose(1, 2);
}
Tensor merge_heads(const Tensor& x) { return x.transpose(1, 2).reshape({x.size(0), x.size(2), x.size(1) * x.size(3)}); }

}  // namespace

ZooModel resnet50_bottleneck(int64_t batch, c10::Device device) {
  InputList in(device);
  const std::size_t x = in.activation({batch, 256, 56, 56});
  const std::size_t w1 = in.param({64, 256, 1, 1});
  BatchNormInputs bn1(in, 64);
  const std::size_t w2 = in.param({64, 64, 3, 3});
  BatchNormInputs bn2(in, 64);
  const std::size_t w3 = in.param({256, 64, 1, 1});
  BatchNormInputs bn3(in, 256);
  auto fn = [=](const TensorList& a) -> TensorList {
    Tensor h = at::relu(bn1(a, at::conv2d(a[x], a[w1])));
    h = at::relu(bn2(a, at::conv2d(h, a[w2], {}, /*stride=*/1, /*padding=*/1)));
    h = bn3(a, at::conv2d(h, a[w3]));
    return {at::relu(h + a[x])};
  };
  return {"resnet50_bottleneck", fn, in.take()};
}

ZooModel resnet_stem_and_head(int64_t batch, c10::Device device) {
  InputList in(device);
  const std::size_t x = in.buffer({batch, 3, 224, 224});
  const std::size_t target = in.buffer({batch}, c10::kLong);
  const std::size_t w = in.param({64, 3, 7, 7});
  BatchNormInputs bn(in, 64);
  LinearInputs fc(in, 64, 1000);
  auto fn = [=](const TensorList& a) -> TensorList {
    Tensor h = at::relu(bn(a, at::conv2d(a[x], a[w], {}, /*stride=*/2, /*padding=*/3)));
    h = at::max_pool2d(h, /*kernel_size=*/3, /*stride=*/2, /*padding=*/1);
    h = at::adaptive_avg_pool2d(h, {1, 1}).flatten(1);
    return {at::cross_entropy_loss(fc(a, h), a[target])};
  };
  return {"resnet_stem_and_head", fn, in.take()};
}

ZooModel mobilenet_v2_block(int64_t batch, c10::Device device) {
  InputList in(device);
  const std::size_t x = in.activation({batch, 32, 56, 56}, /*channels_last=*/true);
  const std::size_t expand = in.param({192, 32, 1, 1}, true);
  BatchNormInputs bn1(in, 192);
  const std::size_t depthwise = in.param({192, 1, 3, 3}, true);
  BatchNormInputs bn2(in, 192);
  const std::size_t project = in.param({32, 192, 1, 1}, true);
  BatchNormInputs bn3(in, 32);
  auto fn = [=](const TensorList& a) -> TensorList {
    Tensor h = at::hardtanh(bn1(a, at::conv2d(a[x], a[expand])), 0, 6);
    h = at::hardtanh(bn2(a, at::conv2d(h, a[depthwise], {}, 1, 1, 1, /*groups=*/192)), 0, 6);
    h = bn3(a, at::conv2d(h, a[project]));
    return {h + a[x]};
  };
  return {"mobilenet_v2_block", fn, in.take()};
}

ZooModel mobilenet_v3_block(int64_t batch, c10::Device device) {
  InputList in(device);
  const std::size_t x = in.activation({batch, 40, 28, 28});
  const std::size_t expand = in.param({120, 40, 1, 1});
  BatchNormInputs bn1(in, 120);
  const std::size_t depthwise = in.param({120, 1, 5, 5});
  BatchNormInputs bn2(in, 120);
  const std::size_t se1_w = in.param({32, 120, 1, 1}), se1_b = in.param({32});
  const std::size_t se2_w = in.param({120, 32, 1, 1}), se2_b = in.param({120});
  const std::size_t project = in.param({40, 120, 1, 1});
  BatchNormInputs bn3(in, 40);
  auto fn = [=](const TensorList& a) -> TensorList {
    Tensor h = at::hardswish(bn1(a, at::conv2d(a[x], a[expand])));
    h = at::hardswish(bn2(a, at::conv2d(h, a[depthwise], {}, 1, 2, 1, /*groups=*/120)));
    Tensor se = at::adaptive_avg_pool2d(h, {1, 1});
    se = at::hardsigmoid(at::conv2d(at::relu(at::conv2d(se, a[se1_w], a[se1_b])), a[se2_w], a[se2_b]));
    return {a[x] + bn3(a, at::conv2d(h * se, a[project]))};
  };
  return {"mobilenet_v3_block", fn, in.take()};
}

ZooModel segmentation_head(int64_t batch, c10::Device device) {
  constexpr int64_t classes = 21;
  InputList in(device);
  const std::size_t x = in.activation({batch, 256, 28, 28});
  const std::size_t target = in.buffer({batch, 112, 112}, c10::kLong);
  const std::size_t w = in.param({128, 256, 3, 3});
  BatchNormInputs bn(in, 128);
  const std::size_t context_w = in.param({128, 128, 1, 1});
  const std::size_t classifier_w = in.param({classes, 128, 1, 1}), classifier_b = in.param({classes});
  auto fn = [=](const TensorList& a) -> TensorList {
    Tensor h = at::relu(bn(a, at::conv2d(at::reflection_pad2d(a[x], {1, 1, 1, 1}), a[w])));
    Tensor context = at::conv2d(at::adaptive_avg_pool2d(h, {4, 4}), a[context_w]);
    h = h + at::upsample_bilinear2d(context, {28, 28}, /*align_corners=*/false);
    Tensor logits = at::upsample_bilinear2d(at::conv2d(h, a[classifier_w], a[classifier_b]), {112, 112}, false);
    return {at::cross_entropy_loss(logits, a[target])};
  };
  return {"segmentation_head", fn, in.take()};
}

ZooModel swin_block(int64_t batch, c10::Device device) {
  constexpr int64_t side = 56, window = 7, width = 96, heads = 3, shift = 3;
  constexpr int64_t windows = (side / window) * (side / window), tokens = window * window;
  InputList in(device);
  const std::size_t x = in.activation({batch, side, side, width});
  LayerNormInputs ln1(in, width);
  LinearInputs qkv(in, width, 3 * width), proj(in, width, width);
  LayerNormInputs ln2(in, width);
  LinearInputs fc1(in, width, 4 * width), fc2(in, 4 * width, width);
  auto fn = [=](const TensorList& a) -> TensorList {
    const int64_t b = a[x].size(0);
    Tensor h = at::roll(ln1(a, a[x]), {-shift, -shift}, {1, 2});
    // [B, H, W, C] -> [B * windows, tokens, C]
    h = h.view({b, side / window, window, side / window, window, width})
            .permute({0, 1, 3, 2, 4, 5})
            .reshape({b * windows, tokens, width});
    auto parts = qkv(a, h).view({b * windows, tokens, 3, heads, width / heads}).permute({2, 0, 3, 1, 4}).unbind(0);
    Tensor attn = proj(a, merge_heads(at::scaled_dot_product_attention(parts[0], parts[1], parts[2])));
    attn = attn.view({b, side / window, side / window, window, window, width})
               .permute({0, 1, 3, 2, 4, 5})
               .reshape({b, side, side, width});
    Tensor y = a[x] + at::roll(attn, {shift, shift}, {1, 2});
    return {y + fc2(a, at::gelu(fc1(a, ln2(a, y))))};
  };
  return {"swin_block", fn, in.take()};
}

ZooModel unet_up_block(int64_t batch, c10::Device device) {
  InputList in(device);
  const std::size_t x = in.activation({batch, 128, 28, 28});
  const std::size_t skip = in.activation({batch, 64, 56, 56});
  const std::size_t up_w = in.param({128, 64, 2, 2});
  const std::size_t up_b = in.param({64});
  const std::size_t w1 = in.param({64, 128, 3, 3});
  BatchNormInputs bn1(in, 64);
  const std::size_t w2 = in.param({64, 64, 3, 3});
  BatchNormInputs bn2(in, 64);
  auto fn = [=](const TensorList& a) -> TensorList {
    Tensor up = at::conv_transpose2d(a[x], a[up_w], a[up_b], /*stride=*/2);
    Tensor h = at::cat({up, a[skip]}, 1);
    h = at::relu(bn1(a, at::conv2d(h, a[w1], {}, 1, 1)));
    h = at::relu(bn2(a, at::conv2d(h, a[w2], {}, 1, 1)));
    // The next level down and back up: max pooling (with indices for the backward), bilinear upsampling.
    Tensor coarse = at::max_pool2d(h, 2);
    return {h + at::upsample_bilinear2d(coarse, {h.size(2), h.size(3)}, /*align_corners=*/false)};
  };
  return {"unet_up_block", fn, in.take()};
}

ZooModel vit_b16_encoder_layer(int64_t batch, c10::Device device) {
  constexpr int64_t tokens = 197, width = 768, heads = 12, mlp = 3072;
  InputList in(device);
  const std::size_t x = in.activation({batch, tokens, width});
  LayerNormInputs ln1(in, width);
  LinearInputs qkv(in, width, 3 * width);
  LinearInputs proj(in, width, width);
  LayerNormInputs ln2(in, width);
  LinearInputs fc1(in, width, mlp);
  LinearInputs fc2(in, mlp, width);
  auto fn = [=](const TensorList& a) -> TensorList {
    auto parts = qkv(a, ln1(a, a[x])).view({-1, tokens, 3, heads, width / heads}).permute({2, 0, 3, 1, 4}).unbind(0);
    Tensor attn = at::scaled_dot_product_attention(parts[0], parts[1], parts[2]);
    Tensor h = a[x] + proj(a, merge_heads(attn));
    return {h + fc2(a, at::gelu(fc1(a, ln2(a, h))))};
  };
  return {"vit_b16_encoder_layer", fn, in.take()};
}

ZooModel bert_layer(int64_t batch, c10::Device device) {
  constexpr int64_t tokens = 128, width = 768, heads = 12, ffn = 3072, vocab = 30522;
  constexpr double p = 0.1;
  InputList in(device);
  const std::size_t ids = in.buffer({batch, tokens}, c10::kLong);
  const std::size_t types = in.buffer({batch, tokens}, c10::kLong);
  const std::size_t mask = in.buffer({batch, 1, 1, tokens});  // additive: 0 or -10000
  const std::size_t word = in.param({vocab, width});
  const std::size_t position = in.param({512, width});
  const std::size_t type = in.param({2, width});
  LayerNormInputs ln_emb(in, width);
  LinearInputs q(in, width, width), k(in, width, width), v(in, width, width), o(in, width, width);
  LayerNormInputs ln1(in, width);
  LinearInputs fc1(in, width, ffn), fc2(in, ffn, width);
  LayerNormInputs ln2(in, width);
  auto fn = [=](const TensorList& a) -> TensorList {
    Tensor positions = at::arange(tokens, at::TensorOptions().dtype(at::kLong).device(a[ids].device()));
    Tensor h =
        at::embedding(a[word], a[ids]) + at::embedding(a[position], positions) + at::embedding(a[type], a[types]);
    h = at::dropout(ln_emb(a, h), p, /*train=*/true);
    Tensor scores = split_heads(q(a, h), heads).matmul(split_heads(k(a, h), heads).transpose(-1, -2)) / 8.0 + a[mask];
    Tensor probs = at::dropout(at::softmax(scores, -1), p, true);
    Tensor context = merge_heads(probs.matmul(split_heads(v(a, h), heads)));
    h = ln1(a, h + at::dropout(o(a, context), p, true));
    return {ln2(a, h + at::dropout(fc2(a, at::gelu(fc1(a, h))), p, true))};
  };
  return {"bert_layer", fn, in.take()};
}

ZooModel gpt2_block_with_loss(int64_t batch, c10::Device device) {
  constexpr int64_t tokens = 128, width = 768, heads = 12, vocab = 50257;
  InputList in(device);
  const std::size_t ids = in.buffer({batch, tokens}, c10::kLong);
  const std::size_t targets = in.buffer({batch, tokens}, c10::kLong);
  const std::size_t wte = in.param({vocab, width});
  const std::size_t wpe = in.param({1024, width});
  LayerNormInputs ln1(in, width);
  LinearInputs attn_in(in, width, 3 * width), attn_out(in, width, width);
  LayerNormInputs ln2(in, width);
  LinearInputs fc(in, width, 4 * width), proj(in, 4 * width, width);
  LayerNormInputs ln_f(in, width);
  auto fn = [=](const TensorList& a) -> TensorList {
    Tensor positions = at::arange(tokens, at::TensorOptions().dtype(at::kLong).device(a[ids].device()));
    Tensor h = at::embedding(a[wte], a[ids]) + at::embedding(a[wpe], positions);
    auto qkv = attn_in(a, ln1(a, h)).split(width, -1);
    Tensor y = at::scaled_dot_product_attention(split_heads(qkv[0], heads), split_heads(qkv[1], heads),
                                                split_heads(qkv[2], heads), {}, 0.0, /*is_causal=*/true);
    h = h + attn_out(a, merge_heads(y));
    h = h + proj(a, at::gelu(fc(a, ln2(a, h)), "tanh"));
    Tensor logits = at::matmul(ln_f(a, h), a[wte].t());
    return {at::cross_entropy_loss(logits.view({-1, vocab}), a[targets].view({-1}))};
  };
  return {"gpt2_block_with_loss", fn, in.take()};
}

ZooModel llama_block(int64_t batch, c10::Device device) {
  constexpr int64_t tokens = 128, width = 1024, heads = 16, kv_heads = 4, head_dim = width / heads, ffn = 2816;
  InputList in(device);
  const std::size_t x = in.activation({batch, tokens, width});
  const std::size_t cos = in.buffer({tokens, head_dim});
  const std::size_t sin = in.buffer({tokens, head_dim});
  const std::size_t norm1 = in.param({width});
  const std::size_t wq = in.param({width, width}), wk = in.param({kv_heads * head_dim, width});
  const std::size_t wv = in.param({kv_heads * head_dim, width}), wo = in.param({width, width});
  const std::size_t norm2 = in.param({width});
  const std::size_t w1 = in.param({ffn, width}), w3 = in.param({ffn, width}), w2 = in.param({width, ffn});
  auto fn = [=](const TensorList& a) -> TensorList {
    auto rms_norm = [&](const Tensor& t, std::size_t w) {
      return t * at::rsqrt(t.pow(2).mean(-1, /*keepdim=*/true) + 1e-6) * a[w];
    };
    auto rotate = [&](const Tensor& t) {  // rotate_half
      auto halves = t.chunk(2, -1);
      Tensor rotated = at::cat({-halves[1], halves[0]}, -1);
      return t * a[cos] + rotated * a[sin];
    };
    auto repeat_kv = [&](const Tensor& t) {  // [B, kv, T, d] -> [B, heads, T, d]
      return t.unsqueeze(2)
          .expand({t.size(0), kv_heads, heads / kv_heads, tokens, head_dim})
          .reshape({t.size(0), heads, tokens, head_dim});
    };
    Tensor h = rms_norm(a[x], norm1);
    Tensor q = rotate(split_heads(at::linear(h, a[wq]), heads));
    Tensor k = repeat_kv(rotate(split_heads(at::linear(h, a[wk]), kv_heads)));
    Tensor v = repeat_kv(split_heads(at::linear(h, a[wv]), kv_heads));
    Tensor y = at::scaled_dot_product_attention(q, k, v, {}, 0.0, /*is_causal=*/true);
    Tensor r = a[x] + at::linear(merge_heads(y), a[wo]);
    Tensor g = rms_norm(r, norm2);
    return {r + at::linear(at::silu(at::linear(g, a[w1])) * at::linear(g, a[w3]), a[w2])};
  };
  return {"llama_block", fn, in.take()};
}

ZooModel lstm_regressor(int64_t batch, c10::Device device) {
  constexpr int64_t steps = 64, features = 128, hidden = 256, layers = 2;
  InputList in(device);
  const std::size_t x = in.buffer({batch, steps, features});
  const std::size_t target = in.buffer({batch, 1});
  const std::size_t h0 = in.buffer({layers, batch, hidden});
  const std::size_t c0 = in.buffer({layers, batch, hidden});
  std::vector<std::size_t> weights;
  for (int64_t layer = 0; layer < layers; ++layer) {
    weights.push_back(in.param({4 * hidden, layer == 0 ? features : hidden}));
    weights.push_back(in.param({4 * hidden, hidden}));
    weights.push_back(in.param({4 * hidden}));
    weights.push_back(in.param({4 * hidden}));
  }
  LinearInputs head(in, hidden, 1);
  auto fn = [=](const TensorList& a) -> TensorList {
    std::vector<Tensor> params;
    for (std::size_t i : weights) params.push_back(a[i]);
    auto [out, hy, cy] = at::lstm(a[x], {a[h0], a[c0]}, params, /*has_biases=*/true, layers, /*dropout=*/0.0,
                                  /*train=*/true, /*bidirectional=*/false, /*batch_first=*/true);
    Tensor last = out.select(1, steps - 1);
    return {at::mse_loss(head(a, last), a[target])};
  };
  return {"lstm_regressor", fn, in.take()};
}

ZooModel adam_foreach_step(int64_t /*batch*/, c10::Device device) {
  // torch.optim.Adam(foreach=True, capturable=True)'s _multi_tensor_adam, lr 1e-3.
  const std::vector<std::vector<int64_t>> shapes = {{1024, 1024}, {1024}, {4096, 1024}, {4096}};
  InputList in(device);
  std::vector<std::size_t> params, grads, exp_avgs, exp_avg_sqs, steps;
  for (const auto& s : shapes) params.push_back(in.buffer(s));
  for (const auto& s : shapes) grads.push_back(in.buffer(s));
  for (const auto& s : shapes) exp_avgs.push_back(in.buffer(s));
  for (const auto& s : shapes) exp_avg_sqs.push_back(in.buffer(s));
  for (std::size_t i = 0; i < shapes.size(); ++i) steps.push_back(in.buffer({}));
  auto fn = [=](const TensorList& a) -> TensorList {
    constexpr double beta1 = 0.9, beta2 = 0.999, lr = 1e-3, eps = 1e-8;
    auto pick = [&](const std::vector<std::size_t>& idx) {
      std::vector<Tensor> out;
      for (std::size_t i : idx) out.push_back(a[i]);
      return out;
    };
    std::vector<Tensor> p = pick(params), g = pick(grads), m = pick(exp_avgs), v = pick(exp_avg_sqs), t = pick(steps);
    at::_foreach_add_(t, 1);
    at::_foreach_lerp_(m, g, 1 - beta1);
    at::_foreach_mul_(v, beta2);
    at::_foreach_addcmul_(v, g, g, 1 - beta2);
    std::vector<Tensor> bias1 = at::_foreach_pow(beta1, t);
    std::vector<Tensor> bias2 = at::_foreach_pow(beta2, t);
    at::_foreach_sub_(bias1, 1);
    at::_foreach_sub_(bias2, 1);
    at::_foreach_neg_(bias2);
    std::vector<Tensor> step_size = at::_foreach_div(bias1, lr);
    at::_foreach_reciprocal_(step_size);
    at::_foreach_sqrt_(bias2);
    std::vector<Tensor> denom = at::_foreach_sqrt(v);
    at::_foreach_div_(denom, at::_foreach_mul(bias2, step_size));
    at::_foreach_add_(denom, eps / lr);
    at::_foreach_addcdiv_(p, m, denom);
    return {};
  };
  return {"adam_foreach_step", fn, in.take()};
}

std::vector<ZooModel> all_models(int64_t batch, c10::Device device) {
  return {resnet50_bottleneck(batch, device),  resnet_stem_and_head(batch, device),  mobilenet_v2_block(batch, device),
          mobilenet_v3_block(batch, device),   segmentation_head(batch, device),     swin_block(batch, device),
          unet_up_block(batch, device),        vit_b16_encoder_layer(batch, device), bert_layer(batch, device),
          gpt2_block_with_loss(batch, device), llama_block(batch, device),           lstm_regressor(batch, device),
          adam_foreach_step(batch, device)};
}

TensorList metadata_examples(const ZooModel& model) {
  TensorList args;
  for (const TensorMeta& meta : model.inputs) args.push_back(metadata_example(meta));
  return args;
}

}  // namespace aotpipe::zoo
