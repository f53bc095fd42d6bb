#pragma once
// The model zoo: one training block of each model family users compile (ResNet, MobileNet,
// U-Net, ViT, BERT, GPT, LLaMA, LSTM, an optimizer step), at the shapes of the real models, in
// functional form (parameters and buffers are inputs). Inputs are described, not made: compile
// them from metadata_example() tensors, so a batch of 256 at ImageNet size costs no memory.
// Used by the fake-compile test (no CPU fallback anywhere) and bench/runtime/fake_compile_bench.
#include <aotpipe/graph/calling_convention.h>
#include <aotpipe/graph/tensor_meta.h>

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace aotpipe::zoo {

struct ZooModel {
  std::string name;
  std::function<TensorList(const TensorList&)> fn;
  // Activations first, then parameters (requires_grad) and buffers; all on one device.
  std::vector<TensorMeta> inputs;
};

// ResNet-50 stage-2 bottleneck (256->64->64->256 channels, 56x56), BatchNorm in training mode.
ZooModel resnet50_bottleneck(int64_t batch, c10::Device device = c10::kCPU);
// ResNet stem (7x7 conv, BN, ReLU, 3x3 max pool) and the classifier head (adaptive average pool,
// Linear, cross entropy) at 224x224.
ZooModel resnet_stem_and_head(int64_t batch, c10::Device device = c10::kCPU);
// MobileNetV2 inverted residual (expand x6, depthwise 3x3, ReLU6, project), channels_last input.
ZooModel mobilenet_v2_block(int64_t batch, c10::Device device = c10::kCPU);
// MobileNetV3 block: expand, hardswish, depthwise 5x5, squeeze-excitation (hardsigmoid), project.
ZooModel mobilenet_v3_block(int64_t batch, c10::Device device = c10::kCPU);
// Segmentation head (DeepLab-like): reflection padding, conv-BN-ReLU, a pooled context branch
// (adaptive average pooling to 4x4, upsampled back), class logits upsampled x4, per-pixel cross
// entropy (nll_loss2d).
ZooModel segmentation_head(int64_t batch, c10::Device device = c10::kCPU);
// Swin transformer block: shifted windows (roll), window attention, MLP, channels-last tokens.
ZooModel swin_block(int64_t batch, c10::Device device = c10::kCPU);
// U-Net up block: transposed conv x2, concat with the skip, two conv-BN-ReLU; then the next
// down step (max pool with indices) and a bilinear upsample of the result.
ZooModel unet_up_block(int64_t batch, c10::Device device = c10::kCPU);
// ViT-B/16 encoder layer (197 tokens, 768 wide, 12 heads): LayerNorm, SDPA, GELU MLP.
ZooModel vit_b16_encoder_layer(int64_t batch, c10::Device device = c10::kCPU);
// BERT-base embeddings and one post-LN layer with an attention mask and dropout 0.1.
ZooModel bert_layer(int64_t batch, c10::Device device = c10::kCPU);
// GPT-2 small block with a causal SDPA, tanh GELU, and the LM head's cross entropy.
ZooModel gpt2_block_with_loss(int64_t batch, c10::Device device = c10::kCPU);
// LLaMA block: RMSNorm, rotary embedding, grouped-query causal SDPA, SwiGLU MLP.
ZooModel llama_block(int64_t batch, c10::Device device = c10::kCPU);
// Two-layer LSTM (aten::lstm, batch first) with a Linear head and MSE loss.
ZooModel lstm_regressor(int64_t batch, c10::Device device = c10::kCPU);
// One Adam step over four parameters with _foreach ops (torch.optim.Adam(foreach=True)).
ZooModel adam_foreach_step(int64_t batch, c10::Device device = c10::kCPU);

// Every model above at `batch`.
std::vector<ZooModel> all_models(int64_t batch, c10::Device device = c10::kCPU);

// The model's inputs as metadata_example() tensors (no memory of their size).
TensorList metadata_examples(const ZooModel& model);

}  // namespace aotpipe::zoo
