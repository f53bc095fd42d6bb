#!/usr/bin/env python3
"""Writes the example corpus examples/*.aotg in aotpipe's IR text form (docs/ir.md), and
examples/README.md, which lists it.

Each example is a small PyTorch function with real model shapes (MLPs, CNN blocks, transformer
layers, RNN cells, normalization layers, embeddings, losses, functions that mutate their inputs
and functions whose outputs alias inputs or each other). It is traced to ATen ops with make_fx
(without functionalization, so in-place ops stay in the graph) on its example inputs, whose
parameters and activations require grad, as AOTAutograd would see them; then the traced graph
is run once on fresh real CPU tensors, recording every value's metadata, so each value's
TensorMeta (sizes, strides, storage offset, dtype) is exactly what the CPU kernels produce (what
`aotpipe run --check-meta` compares with); then it is translated node by node. Inputs that
require grad carry `requires_grad` in their TensorMeta. Tensors a function closes over become
named tensor constants: `constant("key")`.

Other scripts import this file to run the same programs elsewhere (Python AOTAutograd, say):

    import sys; sys.path.insert(0, "examples"); import generate
    for p in generate.programs():
        args = p.make_inputs()          # fresh, deterministic (seeded) example inputs
        outs = p.fn(*args)              # a tuple of tensors

Reproducible: no randomness reaches the output, which depends only on the torch version
(tested with 2.11.0). Run from anywhere:

    $AOTPIPE_PYTHON examples/generate.py             # rewrites examples/*.aotg and README.md
    $AOTPIPE_PYTHON examples/generate.py --check     # exit 1 if a file would change
    $AOTPIPE_PYTHON examples/generate.py --validate  # also run each program eagerly (forward and
                                                     # backward) and with Python AOTAutograd
"""
import argparse
import dataclasses
import inspect
import math
import operator
import pathlib
import sys
import zlib
from typing import Callable, Dict, List, Tuple

import torch
import torch.nn.functional as F
from torch.fx.experimental.proxy_tensor import make_fx

HERE = pathlib.Path(__file__).resolve().parent
aten = torch.ops.aten

DTYPE_SHORT = {
    torch.float32: "f32", torch.float64: "f64", torch.float16: "f16", torch.bfloat16: "bf16",
    torch.int64: "i64", torch.int32: "i32", torch.int16: "i16", torch.int8: "i8", torch.uint8: "u8",
    torch.bool: "b8", torch.complex64: "c64", torch.complex128: "c128",
}

# Ops that change an input's sizes/strides in place without touching its data.
METADATA_MUTATING_OPS = {"t_", "transpose_", "unsqueeze_", "squeeze_", "as_strided_", "swapdims_", "swapaxes_",
                         "resize_", "resize_as_", "set_", "detach_"}


# --- the program list ---------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class Program:
    """One example program.

    name:        file stem and graph name (examples/<name>.aotg)
    category:    mlp, cnn, transformer, rnn, norm, embedding, loss, mutation, aliasing, misc
    description: what it models, with its shapes
    fn:          the PyTorch function; takes tensors, returns a tuple of tensors
    make_inputs: () -> list of fresh example tensors, deterministic (seeded by the name);
                 parameters and activations that get gradients have requires_grad set,
                 buffers, indices and targets do not
    constants:   tensors fn closes over, by the key the .aotg file names them with
    """
    name: str
    category: str
    description: str
    fn: Callable
    make_inputs: Callable[[], List[torch.Tensor]]
    constants: Dict[str, torch.Tensor]

    @property
    def input_names(self) -> List[str]:
        return list(inspect.signature(self.fn).parameters)


_PROGRAMS: List[Program] = []


def programs() -> List[Program]:
    """Every example program, in the order of the README."""
    return list(_PROGRAMS)


def get(name: str) -> Program:
    for p in _PROGRAMS:
        if p.name == name:
            return p
    raise KeyError(name)


class Inputs:
    """Builds example inputs from one seeded generator (each program has its own seed)."""

    def __init__(self, seed: int):
        self.gen = torch.Generator().manual_seed(seed)

    def _randn(self, shape):
        return torch.randn(shape, generator=self.gen)

    def act(self, *shape, grad=True):
        """An activation (or data, grad=False): standard normal."""
        return self._randn(shape).requires_grad_(grad)

    def data(self, *shape):
        """Model input data (images, features): standard normal, no grad."""
        return self._randn(shape)

    def weight(self, *shape, fan_in=None):
        """A parameter initialised like nn.Linear/nn.Conv (uniform +-1/sqrt(fan_in))."""
        fan_in = fan_in or (math.prod(shape[1:]) if len(shape) > 1 else shape[0])
        bound = 1.0 / math.sqrt(fan_in)
        return (torch.rand(shape, generator=self.gen) * 2 - 1).mul_(bound).requires_grad_(True)

    def ones(self, *shape):
        """A norm's scale parameter: ones (with a little noise so it is not trivial)."""
        return (1 + 0.1 * self._randn(shape)).requires_grad_(True)

    def zeros(self, *shape):
        """A norm's shift parameter: small values."""
        return (0.1 * self._randn(shape)).requires_grad_(True)

    def buffer(self, *shape):
        """A buffer (running mean, state, cache): standard normal, no grad."""
        return self._randn(shape)

    def positive(self, *shape):
        """A positive buffer (running variance, second moments): in [0.5, 1.5), no grad."""
        return torch.rand(shape, generator=self.gen) + 0.5

    def index(self, *shape, high):
        """Indices / class targets in [0, high), int64. (aotpipe run draws them in [0, 8).)"""
        return torch.randint(0, high, shape, generator=self.gen)

    def binary(self, *shape):
        """0/1 float targets or masks, no grad."""
        return torch.randint(0, 2, shape, generator=self.gen).float()


def program(category, description, make, constants=None):
    """Registers fn as a program; make(Inputs) returns its example input list."""
    def register(fn):
        seed = zlib.crc32(fn.__name__.encode())

        def make_inputs():
            return make(Inputs(seed))
        _PROGRAMS.append(Program(fn.__name__, category, description, fn, make_inputs, constants or {}))
        return fn
    return register


def _constant_gen(name):
    return torch.Generator().manual_seed(zlib.crc32(name.encode()))


# --- shared model pieces (traced through) ---------------------------------------------------------
def split_heads(x, heads):
    b, t, c = x.shape
    return x.view(b, t, heads, c // heads).transpose(1, 2)  # b, h, t, d


def merge_heads(x):
    b, h, t, d = x.shape
    return x.transpose(1, 2).reshape(b, t, h * d)


def attention(q, k, v, mask=None, additive_mask=None):
    """softmax(q k^T / sqrt(d) [+ mask]) v over b, h, t, d tensors."""
    scores = torch.matmul(q, k.transpose(-2, -1)) * (1.0 / math.sqrt(q.shape[-1]))
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    if additive_mask is not None:
        scores = scores + additive_mask
    return torch.matmul(torch.softmax(scores, dim=-1), v)


def batch_norm_train(x, weight, bias, running_mean, running_var, momentum=0.1, eps=1e-5):
    """Training-mode batch norm updating its running statistics in place: the annotated
    aten::_native_batch_norm_legit (aten::native_batch_norm mutates them without saying so)."""
    out, _, _ = aten._native_batch_norm_legit(x, weight, bias, running_mean, running_var, True, momentum, eps)
    return out


def batch_norm_eval(x, weight, bias, running_mean, running_var, eps=1e-5):
    out, _, _ = aten._native_batch_norm_legit_no_training(x, weight, bias, running_mean, running_var, 0.1, eps)
    return out


def conv2d(x, w, b=None, stride=1, padding=0, groups=1):
    return F.conv2d(x, w, b, stride=stride, padding=padding, groups=groups)


def rms_norm(x, w, eps=1e-5):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat([-x[..., half:], x[..., :half]], dim=-1)


def apply_rotary(x, cos, sin):
    return x * cos + rotate_half(x) * sin


# =================================================================================================
# MLPs
# =================================================================================================
@program("mlp", "MNIST MLP hidden layer: linear 784 -> 256 (t + addmm) and relu, batch 64",
         lambda I: [I.data(64, 784), I.weight(256, 784), I.weight(256, fan_in=784)])
def mlp_layer(x, weight, bias):
    return (torch.relu(F.linear(x, weight, bias)),)


@program("mlp", "MNIST classifier MLP 784 -> 512 -> 256 -> 10 with ReLU, batch 32 (logits)",
         lambda I: [I.data(32, 784), I.weight(512, 784), I.weight(512, fan_in=784),
                    I.weight(256, 512), I.weight(256, fan_in=512), I.weight(10, 256), I.weight(10, fan_in=256)])
def mlp_mnist_3layer(x, w1, b1, w2, b2, w3, b3):
    h = F.relu(F.linear(x, w1, b1))
    h = F.relu(F.linear(h, w2, b2))
    return (F.linear(h, w3, b3),)


@program("mlp", "MLP-Mixer-B/16 token-mixing MLP: layer norm over 768 channels, transpose, "
         "linear 196 -> 384, GELU, linear 384 -> 196, transpose back, residual; batch 2 x 196 patches x 768",
         lambda I: [I.act(2, 196, 768), I.ones(768), I.zeros(768), I.weight(384, 196), I.weight(384, fan_in=196),
                    I.weight(196, 384), I.weight(196, fan_in=384)])
def mixer_token_mlp(x, ln_weight, ln_bias, w1, b1, w2, b2):
    y = F.layer_norm(x, [768], ln_weight, ln_bias, 1e-6).transpose(1, 2)  # b, c, tokens
    y = F.linear(F.gelu(F.linear(y, w1, b1)), w2, b2)
    return (x + y.transpose(1, 2),)


TIMESTEP_FREQS = torch.exp(-math.log(10000.0) * torch.arange(160, dtype=torch.float32) / 160)


@program("mlp", "Stable Diffusion timestep embedding: sinusoidal features of 8 timesteps (320 = cos | sin "
         "of 160 closed-over frequencies), linear 320 -> 1280, SiLU, linear 1280 -> 1280",
         lambda I: [I.data(8).abs().mul(1000), I.weight(1280, 320), I.weight(1280, fan_in=320),
                    I.weight(1280, 1280), I.weight(1280, fan_in=1280)],
         {"timestep.freqs": TIMESTEP_FREQS})
def timestep_embedding_mlp(timesteps, w1, b1, w2, b2):
    args = timesteps[:, None] * TIMESTEP_FREQS[None, :]
    emb = torch.cat([torch.cos(args), torch.sin(args)], dim=-1)
    return (F.linear(F.silu(F.linear(emb, w1, b1)), w2, b2),)


@program("mlp", "MNIST autoencoder MLP 784 -> 256 -> 64 -> 256 -> 784 (ReLU, sigmoid output) with its "
         "MSE reconstruction loss; batch 32; returns the loss and the reconstruction",
         lambda I: [I.data(32, 784).sigmoid(), I.weight(256, 784), I.weight(256, fan_in=784), I.weight(64, 256),
                    I.weight(64, fan_in=256), I.weight(256, 64), I.weight(256, fan_in=64), I.weight(784, 256),
                    I.weight(784, fan_in=256)])
def mlp_autoencoder(x, we1, be1, we2, be2, wd1, bd1, wd2, bd2):
    z = F.linear(F.relu(F.linear(x, we1, be1)), we2, be2)
    recon = torch.sigmoid(F.linear(F.relu(F.linear(z, wd1, bd1)), wd2, bd2))
    return (F.mse_loss(recon, x), recon)


@program("mlp", "Deep SiLU MLP (a NeRF-sized trunk): 63 positional-encoding features -> 4 x 256 SiLU layers "
         "-> 4 outputs (rgb + density), batch 1024 rays",
         lambda I: [I.data(1024, 63), I.weight(256, 63), I.weight(256, fan_in=63), I.weight(256, 256),
                    I.weight(256, fan_in=256), I.weight(256, 256), I.weight(256, fan_in=256), I.weight(256, 256),
                    I.weight(256, fan_in=256), I.weight(4, 256), I.weight(4, fan_in=256)])
def mlp_silu_deep(x, w1, b1, w2, b2, w3, b3, w4, b4, w5, b5):
    h = F.silu(F.linear(x, w1, b1))
    h = F.silu(F.linear(h, w2, b2))
    h = F.silu(F.linear(h, w3, b3))
    h = F.silu(F.linear(h, w4, b4))
    out = F.linear(h, w5, b5)
    return (torch.sigmoid(out[:, :3]), F.relu(out[:, 3]))


# =================================================================================================
# CNN blocks
# =================================================================================================
@program("cnn", "ResNet basic block stem: 3x3 conv 64 -> 64, training-mode batch norm updating its running "
         "stats in place (_native_batch_norm_legit), relu; 4 x 64 x 56 x 56",
         lambda I: [I.act(4, 64, 56, 56), I.weight(64, 64, 3, 3), I.ones(64), I.zeros(64), I.buffer(64),
                    I.positive(64)])
def conv_bn_relu(x, conv_weight, bn_weight, bn_bias, running_mean, running_var):
    y = aten.convolution(x, conv_weight, None, [1, 1], [1, 1], [1, 1], False, [0, 0], 1)
    out, save_mean, save_invstd = aten._native_batch_norm_legit(
        y, bn_weight, bn_bias, running_mean, running_var, True, 0.1, 1e-5)
    return (torch.relu(out), save_mean, save_invstd)


@program("cnn", "CIFAR ResNet-18 basic block (training): conv3x3-BN-ReLU-conv3x3-BN + identity, ReLU; "
         "64 channels, 4 x 64 x 32 x 32; both batch norms update their running stats in place",
         lambda I: [I.act(4, 64, 32, 32), I.weight(64, 64, 3, 3), I.ones(64), I.zeros(64), I.buffer(64),
                    I.positive(64), I.weight(64, 64, 3, 3), I.ones(64), I.zeros(64), I.buffer(64), I.positive(64)])
def resnet_basic_block(x, conv1_w, bn1_w, bn1_b, bn1_mean, bn1_var, conv2_w, bn2_w, bn2_b, bn2_mean, bn2_var):
    out = F.relu(batch_norm_train(conv2d(x, conv1_w, padding=1), bn1_w, bn1_b, bn1_mean, bn1_var))
    out = batch_norm_train(conv2d(out, conv2_w, padding=1), bn2_w, bn2_b, bn2_mean, bn2_var)
    return (F.relu(out + x),)


@program("cnn", "ResNet-50 layer2 bottleneck (eval-mode batch norm): 1x1 512 -> 128, 3x3 128 -> 128, "
         "1x1 128 -> 512, identity residual; 1 x 512 x 28 x 28",
         lambda I: [I.act(1, 512, 28, 28), I.weight(128, 512, 1, 1), I.ones(128), I.zeros(128), I.buffer(128),
                    I.positive(128), I.weight(128, 128, 3, 3), I.ones(128), I.zeros(128), I.buffer(128),
                    I.positive(128), I.weight(512, 128, 1, 1), I.ones(512), I.zeros(512), I.buffer(512),
                    I.positive(512)])
def resnet_bottleneck_eval(x, w1, g1, b1, m1, v1, w2, g2, b2, m2, v2, w3, g3, b3, m3, v3):
    out = F.relu(batch_norm_eval(conv2d(x, w1), g1, b1, m1, v1))
    out = F.relu(batch_norm_eval(conv2d(out, w2, padding=1), g2, b2, m2, v2))
    out = batch_norm_eval(conv2d(out, w3), g3, b3, m3, v3)
    return (F.relu(out + x),)


@program("cnn", "MobileNetV1 depthwise-separable block: depthwise 3x3 conv (groups 32) + batch norm (batch "
         "statistics) + ReLU, pointwise 1x1 conv 32 -> 64 + batch norm + ReLU; 2 x 32 x 112 x 112",
         lambda I: [I.act(2, 32, 112, 112), I.weight(32, 1, 3, 3), I.ones(32), I.zeros(32),
                    I.weight(64, 32, 1, 1), I.ones(64), I.zeros(64)])
def depthwise_separable_conv(x, dw_w, bn1_w, bn1_b, pw_w, bn2_w, bn2_b):
    y = conv2d(x, dw_w, padding=1, groups=32)
    y = F.relu(aten._native_batch_norm_legit.no_stats(y, bn1_w, bn1_b, True, 0.1, 1e-5)[0])
    y = conv2d(y, pw_w)
    return (F.relu(aten._native_batch_norm_legit.no_stats(y, bn2_w, bn2_b, True, 0.1, 1e-5)[0]),)


@program("cnn", "MobileNetV2 inverted residual (BN folded into conv biases): 1x1 expand 24 -> 144, ReLU6, "
         "depthwise 3x3 (groups 144), ReLU6, 1x1 project 144 -> 24, residual; 2 x 24 x 56 x 56",
         lambda I: [I.act(2, 24, 56, 56), I.weight(144, 24, 1, 1), I.weight(144, fan_in=24),
                    I.weight(144, 1, 3, 3), I.weight(144, fan_in=9), I.weight(24, 144, 1, 1),
                    I.weight(24, fan_in=144)])
def mobilenet_v2_inverted_residual(x, w_expand, b_expand, w_dw, b_dw, w_project, b_project):
    y = F.relu6(conv2d(x, w_expand, b_expand))
    y = F.relu6(conv2d(y, w_dw, b_dw, padding=1, groups=144))
    return (x + conv2d(y, w_project, b_project),)


@program("cnn", "ResNet stem: 7x7 conv stride 2, 3 -> 64 on 2 x 3 x 224 x 224 images, eval-mode batch norm, "
         "ReLU, 3x3 max pool stride 2 (max_pool2d_with_indices) -> 2 x 64 x 56 x 56",
         lambda I: [I.data(2, 3, 224, 224), I.weight(64, 3, 7, 7), I.ones(64), I.zeros(64), I.buffer(64),
                    I.positive(64)])
def resnet_stem_maxpool(images, conv_w, bn_w, bn_b, bn_mean, bn_var):
    y = F.relu(batch_norm_eval(conv2d(images, conv_w, stride=2, padding=3), bn_w, bn_b, bn_mean, bn_var))
    return (F.max_pool2d(y, 3, 2, 1),)


@program("cnn", "LeNet-5 on 32 MNIST digits 1 x 28 x 28: conv 5x5 (pad 2) 1 -> 6, tanh, 2x2 avg pool, "
         "conv 5x5 6 -> 16, tanh, avg pool, flatten 400, linear 120, 84, 10",
         lambda I: [I.data(32, 1, 28, 28), I.weight(6, 1, 5, 5), I.weight(6, fan_in=25), I.weight(16, 6, 5, 5),
                    I.weight(16, fan_in=150), I.weight(120, 400), I.weight(120, fan_in=400), I.weight(84, 120),
                    I.weight(84, fan_in=120), I.weight(10, 84), I.weight(10, fan_in=84)])
def lenet5(x, c1_w, c1_b, c2_w, c2_b, f1_w, f1_b, f2_w, f2_b, f3_w, f3_b):
    y = F.avg_pool2d(torch.tanh(conv2d(x, c1_w, c1_b, padding=2)), 2)
    y = F.avg_pool2d(torch.tanh(conv2d(y, c2_w, c2_b)), 2)
    y = torch.tanh(F.linear(y.flatten(1), f1_w, f1_b))
    y = torch.tanh(F.linear(y, f2_w, f2_b))
    return (F.linear(y, f3_w, f3_b),)


@program("cnn", "ResNet-18 classifier head: global average pool of 8 x 512 x 7 x 7 features, flatten, "
         "linear 512 -> 1000",
         lambda I: [I.act(8, 512, 7, 7), I.weight(1000, 512), I.weight(1000, fan_in=512)])
def classifier_head(features, fc_w, fc_b):
    pooled = F.adaptive_avg_pool2d(features, 1).flatten(1)
    return (F.linear(pooled, fc_w, fc_b),)


@program("cnn", "U-Net decoder up block: 2x2 transposed conv stride 2, 128 -> 64 (2 x 128 x 16 x 16 -> 32 x 32), "
         "concatenated with the 2 x 64 x 32 x 32 skip connection, 3x3 conv 128 -> 64, ReLU",
         lambda I: [I.act(2, 128, 16, 16), I.act(2, 64, 32, 32), I.weight(128, 64, 2, 2, fan_in=256),
                    I.weight(64, fan_in=256), I.weight(64, 128, 3, 3), I.weight(64, fan_in=1152)])
def unet_up_block(x, skip, up_w, up_b, conv_w, conv_b):
    up = F.conv_transpose2d(x, up_w, up_b, stride=2)
    return (F.relu(conv2d(torch.cat([up, skip], dim=1), conv_w, conv_b, padding=1)),)


@program("cnn", "Squeeze-and-excitation block (SE-ResNet, reduction 16): global average pool of "
         "2 x 256 x 14 x 14, linear 256 -> 16, ReLU, linear 16 -> 256, sigmoid, channel-wise rescale",
         lambda I: [I.act(2, 256, 14, 14), I.weight(16, 256), I.weight(16, fan_in=256), I.weight(256, 16),
                    I.weight(256, fan_in=16)])
def squeeze_excitation(x, w1, b1, w2, b2):
    s = x.mean((2, 3))
    s = torch.sigmoid(F.linear(F.relu(F.linear(s, w1, b1)), w2, b2))
    return (x * s[:, :, None, None],)


# =================================================================================================
# Transformer layers
# =================================================================================================
@program("transformer", "BERT-base self-attention scores: 12 heads, sequence 128, head dim 64, batch 2 "
         "(bmm, scaled _softmax, bmm)",
         lambda I: [I.act(2, 12, 128, 64), I.act(2, 12, 128, 64), I.act(2, 12, 128, 64)])
def attention_scores(q, k, v):
    b, h, s, d = q.shape
    qf, kf, vf = q.reshape(b * h, s, d), k.reshape(b * h, s, d), v.reshape(b * h, s, d)
    scores = torch.bmm(qf, kf.transpose(1, 2)) * (1.0 / math.sqrt(d))
    probs = torch.ops.aten._softmax(scores, -1, False)
    return (torch.bmm(probs, vf).view(b, h, s, d), probs)


@program("transformer", "BERT-mini multi-head self-attention: fused QKV projection 256 -> 768, 4 heads of 64, "
         "softmax attention, output projection; batch 2 x 128 tokens x 256",
         lambda I: [I.act(2, 128, 256), I.weight(768, 256), I.weight(768, fan_in=256), I.weight(256, 256),
                    I.weight(256, fan_in=256)])
def multihead_self_attention(x, qkv_w, qkv_b, out_w, out_b):
    q, k, v = F.linear(x, qkv_w, qkv_b).split(256, dim=-1)
    ctx = attention(split_heads(q, 4), split_heads(k, 4), split_heads(v, 4))
    return (F.linear(merge_heads(ctx), out_w, out_b),)


GPT2_CAUSAL_MASK = torch.tril(torch.ones(64, 64, dtype=torch.bool)).view(1, 1, 64, 64)


@program("transformer", "GPT-2 small causal self-attention: Conv1D c_attn 768 -> 2304 (addmm with a [in, out] "
         "weight), 12 heads of 64, causal mask from a closed-over bool constant (masked_fill -inf), softmax, "
         "c_proj; batch 1 x 64 tokens",
         lambda I: [I.act(1, 64, 768), I.weight(768, 2304, fan_in=768), I.weight(2304, fan_in=768),
                    I.weight(768, 768), I.weight(768, fan_in=768)],
         {"gpt2.causal_mask": GPT2_CAUSAL_MASK})
def gpt2_causal_attention(x, c_attn_w, c_attn_b, c_proj_w, c_proj_b):
    b, t, c = x.shape
    qkv = torch.addmm(c_attn_b, x.view(-1, c), c_attn_w).view(b, t, 3 * c)
    q, k, v = qkv.split(c, dim=2)
    ctx = attention(split_heads(q, 12), split_heads(k, 12), split_heads(v, 12), mask=GPT2_CAUSAL_MASK[:, :, :t, :t])
    out = torch.addmm(c_proj_b, merge_heads(ctx).view(-1, c), c_proj_w)
    return (out.view(b, t, c),)


@program("transformer", "T5-small cross-attention: 32 decoder positions attend to 64 encoder positions, "
         "d_model 512, 8 heads of 64, bias-free projections, batch 2",
         lambda I: [I.act(2, 32, 512), I.act(2, 64, 512), I.weight(512, 512), I.weight(512, 512),
                    I.weight(512, 512), I.weight(512, 512)])
def cross_attention(decoder_hidden, encoder_out, wq, wk, wv, wo):
    q = split_heads(F.linear(decoder_hidden, wq), 8)
    k = split_heads(F.linear(encoder_out, wk), 8)
    v = split_heads(F.linear(encoder_out, wv), 8)
    return (F.linear(merge_heads(attention(q, k, v)), wo),)


@program("transformer", "Transformer feed-forward block, hidden 768 -> 3072 -> 768, gelu, 2 x 128 tokens "
         "(view + addmm + view)",
         lambda I: [I.act(2, 128, 768), I.weight(3072, 768), I.weight(3072, fan_in=768), I.weight(768, 3072),
                    I.weight(768, fan_in=3072)])
def transformer_ffn(x, w1, b1, w2, b2):
    return (F.linear(F.gelu(F.linear(x, w1, b1)), w2, b2),)


@program("transformer", "ViT-Ti/16 pre-LN encoder layer: LN, 3-head self-attention (fused QKV 192 -> 576), "
         "residual, LN, MLP 192 -> 768 -> 192 with GELU, residual; batch 2 x 197 tokens",
         lambda I: [I.act(2, 197, 192), I.ones(192), I.zeros(192), I.weight(576, 192), I.weight(576, fan_in=192),
                    I.weight(192, 192), I.weight(192, fan_in=192), I.ones(192), I.zeros(192), I.weight(768, 192),
                    I.weight(768, fan_in=192), I.weight(192, 768), I.weight(192, fan_in=768)])
def pre_ln_encoder_layer(x, ln1_w, ln1_b, qkv_w, qkv_b, proj_w, proj_b, ln2_w, ln2_b, fc1_w, fc1_b, fc2_w, fc2_b):
    h = F.layer_norm(x, [192], ln1_w, ln1_b, 1e-6)
    q, k, v = F.linear(h, qkv_w, qkv_b).split(192, dim=-1)
    x = x + F.linear(merge_heads(attention(split_heads(q, 3), split_heads(k, 3), split_heads(v, 3))), proj_w, proj_b)
    h = F.layer_norm(x, [192], ln2_w, ln2_b, 1e-6)
    return (x + F.linear(F.gelu(F.linear(h, fc1_w, fc1_b)), fc2_w, fc2_b),)


@program("transformer", "BERT-tiny post-LN encoder layer: separate Q/K/V projections 128 -> 128, 2 heads, "
         "additive attention mask input [4, 1, 1, 128], output projection, residual + LN, FFN 128 -> 512 -> 128 "
         "(GELU), residual + LN; batch 4 x 128 tokens",
         lambda I: [I.act(4, 128, 128), I.buffer(4, 1, 1, 128).clamp(max=0).mul(1e4), I.weight(128, 128),
                    I.weight(128, fan_in=128), I.weight(128, 128), I.weight(128, fan_in=128), I.weight(128, 128),
                    I.weight(128, fan_in=128), I.weight(128, 128), I.weight(128, fan_in=128), I.ones(128),
                    I.zeros(128), I.weight(512, 128), I.weight(512, fan_in=128), I.weight(128, 512),
                    I.weight(128, fan_in=512), I.ones(128), I.zeros(128)])
def post_ln_encoder_layer(x, attn_mask, wq, bq, wk, bk, wv, bv, wo, bo, ln1_w, ln1_b, w1, b1, w2, b2, ln2_w, ln2_b):
    q, k, v = (split_heads(F.linear(x, w, b), 2) for w, b in ((wq, bq), (wk, bk), (wv, bv)))
    ctx = attention(q, k, v, additive_mask=attn_mask)
    x = F.layer_norm(x + F.linear(merge_heads(ctx), wo, bo), [128], ln1_w, ln1_b, 1e-12)
    return (F.layer_norm(x + F.linear(F.gelu(F.linear(x, w1, b1)), w2, b2), [128], ln2_w, ln2_b, 1e-12),)


@program("transformer", "Fused causal attention: F.scaled_dot_product_attention(is_causal=True) on CPU "
         "(_scaled_dot_product_flash_attention_for_cpu), LLaMA-like 8 heads x 128 tokens x head dim 64, batch 1",
         lambda I: [I.act(1, 8, 128, 64), I.act(1, 8, 128, 64), I.act(1, 8, 128, 64)])
def sdpa_causal_attention(q, k, v):
    return (F.scaled_dot_product_attention(q, k, v, is_causal=True),)


@program("transformer", "Rotary position embedding (LLaMA-7B head dim 128, 32 heads, 64 positions): "
         "q * cos + rotate_half(q) * sin for q and k; cos/sin tables are inputs (buffers)",
         lambda I: [I.act(1, 32, 64, 128), I.act(1, 32, 64, 128), I.buffer(64, 128).cos(),
                    I.buffer(64, 128).sin()])
def rotary_embedding(q, k, cos, sin):
    return (apply_rotary(q, cos, sin), apply_rotary(k, cos, sin))


SMOLLM_CAUSAL_BIAS = torch.triu(torch.full((32, 32), float("-inf")), diagonal=1)


@program("transformer", "SmolLM-135M attention (LLaMA architecture): q/k/v projections 576 -> 9 x 64 / "
         "3 x 64 / 3 x 64, rotary embedding, grouped-query attention (kv heads expanded 3x), additive causal "
         "bias from a closed-over -inf constant, o_proj; batch 2 x 32 tokens",
         lambda I: [I.act(2, 32, 576), I.weight(576, 576), I.weight(192, 576), I.weight(192, 576),
                    I.weight(576, 576), I.buffer(32, 64).cos(), I.buffer(32, 64).sin()],
         {"smollm.causal_bias": SMOLLM_CAUSAL_BIAS})
def llama_gqa_attention(x, wq, wk, wv, wo, cos, sin):
    b, t, _ = x.shape
    q = apply_rotary(split_heads(F.linear(x, wq), 9), cos, sin)
    k = apply_rotary(split_heads(F.linear(x, wk), 3), cos, sin)
    v = split_heads(F.linear(x, wv), 3)
    k = k[:, :, None].expand(b, 3, 3, t, 64).reshape(b, 9, t, 64)
    v = v[:, :, None].expand(b, 3, 3, t, 64).reshape(b, 9, t, 64)
    return (F.linear(merge_heads(attention(q, k, v, additive_mask=SMOLLM_CAUSAL_BIAS)), wo),)


@program("transformer", "SmolLM-135M SwiGLU feed-forward: RMSNorm, gate and up projections 576 -> 1536, "
         "silu(gate) * up, down projection 1536 -> 576, residual; batch 2 x 32 tokens",
         lambda I: [I.act(2, 32, 576), I.ones(576), I.weight(1536, 576), I.weight(1536, 576), I.weight(576, 1536)])
def swiglu_ffn(x, norm_w, w_gate, w_up, w_down):
    h = rms_norm(x, norm_w)
    return (x + F.linear(F.silu(F.linear(h, w_gate)) * F.linear(h, w_up), w_down),)


@program("transformer", "ViT-B/16 patch embedding: 16x16 stride-16 conv 3 -> 768 on 2 x 3 x 224 x 224 images, "
         "flatten to 196 tokens, prepend the class token (expand + cat), add position embeddings [1, 197, 768]",
         lambda I: [I.data(2, 3, 224, 224), I.weight(768, 3, 16, 16), I.weight(768, fan_in=768),
                    I.act(1, 1, 768), I.act(1, 197, 768)])
def vit_patch_embedding(images, patch_w, patch_b, cls_token, pos_embed):
    x = conv2d(images, patch_w, patch_b, stride=16).flatten(2).transpose(1, 2)
    x = torch.cat([cls_token.expand(x.shape[0], -1, -1), x], dim=1)
    return (x + pos_embed,)


# =================================================================================================
# RNN cells
# =================================================================================================
_lstm_gen = torch.Generator().manual_seed(0)
LSTM_CONSTANTS = {
    "lstm.weight_ih": torch.randn(2048, 256, generator=_lstm_gen),
    "lstm.weight_hh": torch.randn(2048, 512, generator=_lstm_gen),
    "lstm.bias": torch.randn(2048, generator=_lstm_gen),
}


@program("rnn", "LSTM cell, input 256, hidden 512, batch 16; weights are named tensor constants "
         "(mm, add, chunk -> split, sigmoid, tanh)",
         lambda I: [I.act(16, 256), I.act(16, 512), I.act(16, 512)], LSTM_CONSTANTS)
def lstm_cell(x, h, c):
    w_ih, w_hh, b = LSTM_CONSTANTS["lstm.weight_ih"], LSTM_CONSTANTS["lstm.weight_hh"], LSTM_CONSTANTS["lstm.bias"]
    gates = torch.mm(x, w_ih.t()) + torch.mm(h, w_hh.t()) + b
    i, f, g, o = gates.chunk(4, 1)
    c_next = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
    h_next = torch.sigmoid(o) * torch.tanh(c_next)
    return (h_next, c_next)


def _lstm_step(x, h, c, w_ih, w_hh, b_ih, b_hh):
    gates = F.linear(x, w_ih, b_ih) + F.linear(h, w_hh, b_hh)
    i, f, g, o = gates.chunk(4, 1)
    c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
    return torch.sigmoid(o) * torch.tanh(c), c


@program("rnn", "GRU cell (nn.GRUCell), input 256, hidden 512, batch 16; weights are parameters: "
         "r, z, n gates from two linears and chunk",
         lambda I: [I.act(16, 256), I.act(16, 512), I.weight(1536, 256, fan_in=512), I.weight(1536, 512),
                    I.weight(1536, fan_in=512), I.weight(1536, fan_in=512)])
def gru_cell(x, h, w_ih, w_hh, b_ih, b_hh):
    i_r, i_z, i_n = F.linear(x, w_ih, b_ih).chunk(3, 1)
    h_r, h_z, h_n = F.linear(h, w_hh, b_hh).chunk(3, 1)
    r = torch.sigmoid(i_r + h_r)
    z = torch.sigmoid(i_z + h_z)
    n = torch.tanh(i_n + r * h_n)
    return ((1 - z) * n + z * h,)


@program("rnn", "Elman RNN cell (nn.RNNCell, tanh), input 128, hidden 256, batch 32",
         lambda I: [I.act(32, 128), I.act(32, 256), I.weight(256, 128, fan_in=256), I.weight(256, 256),
                    I.weight(256, fan_in=256), I.weight(256, fan_in=256)])
def rnn_tanh_cell(x, h, w_ih, w_hh, b_ih, b_hh):
    return (torch.tanh(F.linear(x, w_ih, b_ih) + F.linear(h, w_hh, b_hh)),)


@program("rnn", "LSTM layer unrolled over 2 time steps (shared weights), input 256, hidden 512, batch 16: "
         "x [2, 16, 256] -> outputs [2, 16, 512] (stack), h_n, c_n",
         lambda I: [I.act(2, 16, 256), I.act(16, 512), I.act(16, 512), I.weight(2048, 256, fan_in=512),
                    I.weight(2048, 512), I.weight(2048, fan_in=512), I.weight(2048, fan_in=512)])
def lstm_unrolled_2step(x, h0, c0, w_ih, w_hh, b_ih, b_hh):
    h1, c1 = _lstm_step(x[0], h0, c0, w_ih, w_hh, b_ih, b_hh)
    h2, c2 = _lstm_step(x[1], h1, c1, w_ih, w_hh, b_ih, b_hh)
    return (torch.stack([h1, h2]), h2, c2)


# =================================================================================================
# Normalization layers
# =================================================================================================
@program("norm", "Transformer layer norm over the hidden size 768 (native_layer_norm), batch 2 x 128 tokens",
         lambda I: [I.act(2, 128, 768), I.ones(768), I.zeros(768)])
def layer_norm(x, weight, bias):
    out, mean, rstd = torch.ops.aten.native_layer_norm(x, [768], weight, bias, 1e-12)
    return (out, mean, rstd)


@program("norm", "Layer norm written out (mean, centered square mean, rsqrt, affine) over hidden 512, "
         "batch 4 x 64 tokens",
         lambda I: [I.act(4, 64, 512), I.ones(512), I.zeros(512)])
def layer_norm_decomposed(x, weight, bias):
    mean = x.mean(-1, keepdim=True)
    xc = x - mean
    var = (xc * xc).mean(-1, keepdim=True)
    return (xc * torch.rsqrt(var + 1e-5) * weight + bias,)


@program("norm", "BatchNorm1d training step on 64 x 256 features (_native_batch_norm_legit, momentum 0.1): "
         "running_mean / running_var buffers are updated in place",
         lambda I: [I.act(64, 256), I.ones(256), I.zeros(256), I.buffer(256), I.positive(256)])
def batch_norm_train_running_stats(x, weight, bias, running_mean, running_var):
    return (batch_norm_train(x, weight, bias, running_mean, running_var),)


@program("norm", "BatchNorm2d training step written out on 8 x 64 x 28 x 28: batch mean/var over N, H, W, "
         "running_mean.mul_(0.9).add_(mean, alpha=0.1), the same for running_var (unbiased), "
         "num_batches_tracked.add_(1)",
         lambda I: [I.act(8, 64, 28, 28), I.ones(64), I.zeros(64), I.buffer(64), I.positive(64),
                    torch.zeros((), dtype=torch.int64)])
def batch_norm_manual_update(x, weight, bias, running_mean, running_var, num_batches_tracked):
    var, mean = torch.var_mean(x, [0, 2, 3], correction=0)
    n = x.numel() / x.shape[1]
    with torch.no_grad():
        running_mean.mul_(0.9).add_(mean, alpha=0.1)
        running_var.mul_(0.9).add_(var * (n / (n - 1)), alpha=0.1)
        num_batches_tracked.add_(1)
    y = (x - mean[None, :, None, None]) * torch.rsqrt(var[None, :, None, None] + 1e-5)
    return (y * weight[None, :, None, None] + bias[None, :, None, None],)


@program("norm", "BatchNorm2d in eval mode via F.batch_norm (native_batch_norm with training=False) on "
         "8 x 64 x 28 x 28, running stats read only",
         lambda I: [I.act(8, 64, 28, 28), I.ones(64), I.zeros(64), I.buffer(64), I.positive(64)])
def batch_norm_eval_functional(x, weight, bias, running_mean, running_var):
    return (F.batch_norm(x, running_mean, running_var, weight, bias, training=False),)


@program("norm", "Stable Diffusion UNet GroupNorm (32 groups) + SiLU on 2 x 320 x 16 x 16 "
         "(native_group_norm)",
         lambda I: [I.act(2, 320, 16, 16), I.ones(320), I.zeros(320)])
def group_norm_silu(x, weight, bias):
    return (F.silu(F.group_norm(x, 32, weight, bias, 1e-5)),)


@program("norm", "LLaMA RMSNorm x * rsqrt(mean(x^2) + eps) * weight, SmolLM hidden 576, batch 2 x 32 tokens",
         lambda I: [I.act(2, 32, 576), I.ones(576)])
def rms_norm_layer(x, weight):
    return (rms_norm(x, weight),)


@program("norm", "Affine InstanceNorm2d of a fast-style-transfer network via F.instance_norm (weights repeated "
         "per sample, batch norm of a 1 x (N*C) x H x W view) on 2 x 64 x 64 x 64",
         lambda I: [I.act(2, 64, 64, 64), I.ones(64), I.zeros(64)])
def instance_norm_affine(x, weight, bias):
    return (F.instance_norm(x, weight=weight, bias=bias, eps=1e-5),)


@program("norm", "Instance normalization of 8 x 64 x 32 x 32 feature maps from var_mean (a multi-output op)",
         lambda I: [I.act(8, 64, 32, 32)])
def instance_norm_var_mean(x):
    var, mean = torch.var_mean(x, [2, 3], correction=0, keepdim=True)
    return ((x - mean) * torch.rsqrt(var + 1e-5), var, mean)


# =================================================================================================
# Embeddings
# =================================================================================================
@program("embedding", "Embedding lookup of 4 x 16 token ids (vocabulary 8) into 32 features, concatenated with "
         "a positional table and mean-pooled",
         lambda I: [I.index(4, 16, high=8), I.act(8, 32), I.act(4, 16, 32)])
def embedding_concat(tokens, table, positions):
    emb = F.embedding(tokens, table)
    both = torch.cat([emb, positions], dim=2)
    return (both.mean(1),)


@program("embedding", "BERT-tiny embeddings: word (30522 x 128, padding_idx 0) + position (first 64 rows of "
         "512 x 128) + token type 0 (row of 2 x 128), LayerNorm; 4 x 64 token ids",
         lambda I: [I.index(4, 64, high=30522), I.act(30522, 128), I.act(512, 128), I.act(2, 128), I.ones(128),
                    I.zeros(128)])
def bert_embeddings(input_ids, word_emb, pos_emb, type_emb, ln_w, ln_b):
    t = input_ids.shape[1]
    x = F.embedding(input_ids, word_emb, padding_idx=0) + pos_emb[:t] + type_emb[0]
    return (F.layer_norm(x, [128], ln_w, ln_b, 1e-12),)


@program("embedding", "DLRM-style sparse feature: embedding_bag (sum) of 128 bags of 20 ids in a 10000 x 64 "
         "table (_embedding_bag, offsets from arange)",
         lambda I: [I.index(128, 20, high=10000), I.act(10000, 64)])
def embedding_bag_sum(indices, table):
    return (F.embedding_bag(indices, table, mode="sum"),)


@program("embedding", "word2vec-style CBOW with a tied table: mean of 8 context embeddings (10000 x 128 table), "
         "logits against the same table transposed, cross-entropy over 10000 words; batch 64",
         lambda I: [I.index(64, 8, high=10000), I.index(64, high=10000), I.act(10000, 128)])
def cbow_tied_embedding(context, target, table):
    h = F.embedding(context, table).mean(1)
    return (F.cross_entropy(h @ table.t(), target),)


# =================================================================================================
# Losses
# =================================================================================================
@program("loss", "ImageNet cross-entropy: 32 x 1000 logits, int64 targets -> scalar (_log_softmax + "
         "nll_loss_forward)",
         lambda I: [I.act(32, 1000), I.index(32, high=1000)])
def cross_entropy_loss(logits, target):
    return (F.cross_entropy(logits, target),)


@program("loss", "Cross-entropy with label smoothing 0.1 on 32 x 1000 logits -> scalar",
         lambda I: [I.act(32, 1000), I.index(32, high=1000)])
def label_smoothing_cross_entropy(logits, target):
    return (F.cross_entropy(logits, target, label_smoothing=0.1),)


@program("loss", "Linear regression head 64 -> 1 on 256 samples with MSE loss -> scalar",
         lambda I: [I.data(256, 64), I.buffer(256, 1), I.weight(1, 64), I.weight(1, fan_in=64)])
def mse_regression_loss(x, y, weight, bias):
    return (F.mse_loss(F.linear(x, weight, bias), y),)


@program("loss", "COCO multi-label BCE-with-logits: 32 x 80 logits, 0/1 float targets -> scalar",
         lambda I: [I.act(32, 80), I.binary(32, 80)])
def bce_with_logits_loss(logits, targets):
    return (F.binary_cross_entropy_with_logits(logits, targets),)


@program("loss", "Faster R-CNN box regression smooth L1 (beta 1/9) over 128 x 4 deltas, summed and divided by "
         "the batch -> scalar",
         lambda I: [I.act(128, 4), I.buffer(128, 4)])
def smooth_l1_box_loss(deltas, target_deltas):
    return (F.smooth_l1_loss(deltas, target_deltas, beta=1.0 / 9, reduction="sum") / 128,)


@program("loss", "Knowledge distillation (CIFAR-100, T = 4): KL(softmax(teacher/T) || log_softmax(student/T)) "
         "* T^2, batchmean, plus 0.5 x hard cross-entropy; 32 x 100 -> scalar",
         lambda I: [I.act(32, 100), I.buffer(32, 100), I.index(32, high=100)])
def kl_div_distillation_loss(student_logits, teacher_logits, target):
    soft = F.kl_div(F.log_softmax(student_logits / 4, 1), F.softmax(teacher_logits / 4, 1), reduction="batchmean")
    return (soft * 16 + 0.5 * F.cross_entropy(student_logits, target),)


@program("loss", "Language-model loss: 4 x 64 x 1000 logits flattened to 256 positions, cross-entropy "
         "with ignore_index -100 -> scalar",
         lambda I: [I.act(4, 64, 1000), I.index(4, 64, high=1000)])
def sequence_cross_entropy(logits, targets):
    return (F.cross_entropy(logits.view(-1, 1000), targets.view(-1), ignore_index=-100),)


@program("loss", "CLIP contrastive loss: L2-normalized 32 x 512 image and text embeddings, learned "
         "temperature (scalar parameter, exp), symmetric cross-entropy against arange labels -> scalar",
         lambda I: [I.act(32, 512), I.act(32, 512), torch.tensor(math.log(1 / 0.07)).requires_grad_(True)])
def clip_contrastive_loss(image_emb, text_emb, logit_scale):
    image_emb = F.normalize(image_emb, dim=-1)
    text_emb = F.normalize(text_emb, dim=-1)
    logits = logit_scale.exp() * image_emb @ text_emb.t()
    labels = torch.arange(logits.shape[0])
    return ((F.cross_entropy(logits, labels) + F.cross_entropy(logits.t(), labels)) / 2,)


# =================================================================================================
# Input mutations (in-place ops on inputs that do not require grad, as buffers are)
# =================================================================================================
@program("mutation", "Gradient accumulation: the weight gradient x^T dy of a 256 -> 256 linear (batch 64) "
         "added in place to an accumulator buffer (grad_acc.add_); returns the gradient's norm; no input "
         "requires grad (a hand-written backward)",
         lambda I: [I.act(64, 256, grad=False), I.act(64, 256, grad=False), I.buffer(256, 256)])
def grad_accumulate_add_(x, grad_out, grad_acc):
    g = grad_out.t() @ x
    grad_acc.add_(g)
    return (g.norm(),)


@program("mutation", "Mean-teacher EMA: ema_w.mul_(0.999).add_(w.detach(), alpha=0.001) on a 512 x 512 "
         "weight, then the teacher's forward x @ ema_w^T reads the updated buffer; batch 32",
         lambda I: [I.act(32, 512), I.weight(512, 512), I.buffer(512, 512)])
def ema_update(x, weight, ema_weight):
    ema_weight.mul_(0.999).add_(weight.detach(), alpha=0.001)
    return (F.linear(x, weight), F.linear(x, ema_weight))


@program("mutation", "SGD with momentum 0.9 and weight decay 5e-4 on a 512 x 512 parameter (as under no_grad): "
         "d_p = g + wd * p; buf.mul_(0.9).add_(d_p); p.add_(buf, alpha=-0.1); returns the update's norm",
         lambda I: [I.buffer(512, 512), I.buffer(512, 512), I.buffer(512, 512)])
def sgd_momentum_step(param, grad, momentum_buf):
    d_p = grad.add(param, alpha=5e-4)
    momentum_buf.mul_(0.9).add_(d_p)
    param.add_(momentum_buf, alpha=-0.1)
    return (momentum_buf.norm(),)


@program("mutation", "Adam step 10 (lr 1e-3, betas 0.9/0.999, eps 1e-8) on a 256 x 1024 parameter: exp_avg.lerp_, "
         "exp_avg_sq.mul_().addcmul_(), denom, param.addcdiv_(); all four inputs but the gradient mutated in "
         "place (step is an int64 counter)",
         lambda I: [I.buffer(256, 1024), I.buffer(256, 1024), I.buffer(256, 1024), I.positive(256, 1024) * 1e-3,
                    torch.tensor(9, dtype=torch.int64)])
def adam_step(param, grad, exp_avg, exp_avg_sq, step):
    step.add_(1)
    exp_avg.lerp_(grad, 0.1)
    exp_avg_sq.mul_(0.999).addcmul_(grad, grad, value=0.001)
    bias_correction1 = 1 - 0.9 ** 10
    bias_correction2_sqrt = math.sqrt(1 - 0.999 ** 10)
    denom = (exp_avg_sq.sqrt() / bias_correction2_sqrt).add_(1e-8)
    param.addcdiv_(exp_avg, denom, value=-1e-3 / bias_correction1)
    return (step * 1,)


@program("mutation", "In-place ReLU on an input activation (x.relu_(), as nn.ReLU(inplace=True) on a tensor "
         "that needs no grad), then linear 512 -> 1000; batch 32",
         lambda I: [I.act(32, 512, grad=False), I.weight(1000, 512), I.weight(1000, fan_in=512)])
def relu_inplace_input(x, weight, bias):
    x.relu_()
    return (F.linear(x, weight, bias),)


@program("mutation", "In-place ImageNet normalization of an image batch 4 x 3 x 64 x 64, channel by channel "
         "through views (img[:, c].sub_(mean).div_(std): mutations of views of an input), then a 3x3 conv 3 -> 16",
         lambda I: [I.data(4, 3, 64, 64).sigmoid(), I.weight(16, 3, 3, 3)])
def normalize_image_inplace(images, conv_w):
    for c, (m, s) in enumerate(zip((0.485, 0.456, 0.406), (0.229, 0.224, 0.225))):
        images[:, c].sub_(m).div_(s)
    return (conv2d(images, conv_w, padding=1),)


@program("mutation", "GPT-2 small decode step with a KV cache: the new token's k and v (1 x 12 heads x 64) "
         "are copied into position 16 of the cache buffers [1, 12, 64, 64] (copy_ into a slice: mutation of a "
         "view of an input), then attention over the first 17 positions",
         lambda I: [I.act(1, 1, 768), I.weight(2304, 768), I.weight(2304, fan_in=768), I.buffer(1, 12, 64, 64),
                    I.buffer(1, 12, 64, 64)])
def kv_cache_update(x, qkv_w, qkv_b, k_cache, v_cache):
    q, k, v = F.linear(x, qkv_w, qkv_b).split(768, dim=-1)
    with torch.no_grad():
        k_cache[:, :, 16:17].copy_(split_heads(k.detach(), 12))
        v_cache[:, :, 16:17].copy_(split_heads(v.detach(), 12))
    ctx = attention(split_heads(q, 12), k_cache[:, :, :17], v_cache[:, :, :17])
    return (merge_heads(ctx),)


@program("mutation", "Stateful RNN for truncated backprop through time, double-buffered state: an Elman step "
         "(input 128, hidden 256, batch 32) reads its hidden state from one buffer and writes the new state "
         "into the other with next_state.copy_(h.detach()); returns h",
         lambda I: [I.act(32, 128), I.buffer(32, 256), I.buffer(32, 256), I.weight(256, 128, fan_in=256),
                    I.weight(256, 256), I.weight(256, fan_in=256)])
def rnn_state_copy_(x, state, next_state, w_ih, w_hh, b):
    # Not state.copy_(...): the linear saves `state` for backward, and eager autograd rejects a
    # saved tensor modified in place.
    h = torch.tanh(F.linear(x, w_ih, b) + F.linear(state, w_hh))
    next_state.copy_(h.detach())
    return (h,)


@program("mutation", "Metadata mutation: a sinusoidal position table buffer stored [dim 128, positions 64] is "
         "turned in place with table.t_() (its sizes and strides change, not its data) and added to "
         "4 x 64 x 128 token activations, then linear 128 -> 128",
         lambda I: [I.act(4, 64, 128), I.buffer(128, 64).sin(), I.weight(128, 128)])
def transpose_inplace_metadata(x, pos_table, weight):
    # The table is only added (not saved for backward): Python AOTAutograd replays a metadata
    # mutation on the real input after the forward, which would invalidate a saved input.
    pos_table.t_()
    return (F.linear(x + pos_table, weight),)


@program("mutation", "Metadata mutation: a 4 x 128 additive attention mask input made broadcastable with "
         "mask.unsqueeze_(1).unsqueeze_(1) -> [4, 1, 1, 128], added to BERT-tiny scores (2 heads of 64), softmax",
         lambda I: [I.act(4, 2, 128, 64), I.act(4, 2, 128, 64), I.act(4, 2, 128, 64),
                    I.buffer(4, 128).clamp(max=0).mul(1e4)])
def attention_mask_unsqueeze_(q, k, v, mask):
    mask.unsqueeze_(1).unsqueeze_(1)
    return (attention(q, k, v, additive_mask=mask),)


@program("mutation", "VQ-VAE EMA codebook step (512 codes x 64): quantize 256 encoder vectors by their codes "
         "(embedding), straight-through estimator, commitment loss; code counts and code sums updated in place "
         "with index_add_",
         lambda I: [I.act(256, 64), I.index(256, high=512), I.buffer(512, 64), I.positive(512), I.buffer(512, 64)])
def vq_codebook_ema(z, codes, codebook, cluster_size, embed_sum):
    quantized = F.embedding(codes, codebook)
    with torch.no_grad():
        cluster_size.index_add_(0, codes, torch.ones(codes.shape[0]))
        embed_sum.index_add_(0, codes, z.detach())
    z_q = z + (quantized - z).detach()
    return (z_q, F.mse_loss(z, quantized))


@program("mutation", "In-place ops on intermediates only (no input is mutated): linear 256 -> 256, .mul_(scale), "
         ".relu_(), second linear, .add_(residual); batch 64",
         lambda I: [I.act(64, 256), I.weight(256, 256), I.weight(256, fan_in=256), I.weight(256, 256),
                    I.weight(256, fan_in=256)])
def inplace_intermediate(x, w1, b1, w2, b2):
    h = F.linear(x, w1, b1)
    h.mul_(0.5).relu_()
    out = F.linear(h, w2, b2)
    out.add_(x)
    return (out,)


@program("mutation", "Mutated input returned: a 16 x 512 recurrent state buffer is decayed in place "
         "(state.mul_(0.9).add_(x)) and returned itself, with a view of it (state.view(16, 8, 64)) and a "
         "readout linear 512 -> 10",
         lambda I: [I.act(16, 512, grad=False), I.buffer(16, 512), I.weight(10, 512)])
def mutate_and_return_input(x, state, readout_w):
    state.mul_(0.9).add_(x)
    return (state, state.view(16, 8, 64), F.linear(state, readout_w))


# =================================================================================================
# Aliased outputs
# =================================================================================================
@program("aliasing", "Views of an image batch 8 x 3 x 32 x 32 and a weight 128 x 64: t, view, slice, permute, "
         "transpose, select, unsqueeze, expand, diagonal (outputs alias their inputs, strides kept)",
         lambda I: [I.act(8, 3, 32, 32), I.act(128, 64)])
def views(img, w):
    wt = w.t()
    flat = img.view(8, 3 * 32 * 32)
    crop = img[:, :, 4:28, 4:28]
    nhwc = img.permute(0, 2, 3, 1)
    tr = w.transpose(0, 1)[1:33]
    green = img.select(1, 1)
    bcast = w[0].unsqueeze(0).expand(16, 64)
    diag = w.diagonal()
    every_other = flat[:, ::2]
    return (wt, flat, crop, nhwc, tr, green, bcast, diag, every_other)


@program("aliasing", "Input returned as an output: a pre-activation residual unit returns its input x itself "
         "(the residual) next to GELU(linear 768 -> 768); batch 8 x 768",
         lambda I: [I.act(8, 768), I.weight(768, 768), I.weight(768, fan_in=768)])
def return_input_and_activation(x, weight, bias):
    return (x, F.gelu(F.linear(x, weight, bias)))


@program("aliasing", "Views of inputs only: q, k, v activations [2, 128, 768] split into 12 heads "
         "(view + transpose) and returned; no compute",
         lambda I: [I.act(2, 128, 768), I.act(2, 128, 768), I.act(2, 128, 768)])
def split_heads_views(q, k, v):
    return (split_heads(q, 12), split_heads(k, 12), split_heads(v, 12))


@program("aliasing", "An intermediate returned together with a view of it: linear 512 -> 1024 on "
         "4 x 32 tokens, returned as [4, 32, 1024] and as its [128, 1024] view",
         lambda I: [I.act(4, 32, 512), I.weight(1024, 512), I.weight(1024, fan_in=512)])
def linear_with_view_output(x, weight, bias):
    y = F.gelu(F.linear(x, weight, bias))
    return (y, y.view(-1, 1024))


@program("aliasing", "Several views of one intermediate: timm ViT-S attention input, fused QKV 384 -> 1152 on "
         "2 x 197 tokens, reshape [2, 197, 3, 6, 64], permute, unbind into q, k, v (all views of the QKV "
         "activation, which is not returned)",
         lambda I: [I.act(2, 197, 384), I.weight(1152, 384), I.weight(1152, fan_in=384)])
def qkv_unbind_views(x, qkv_w, qkv_b):
    b, n, _ = x.shape
    qkv = F.linear(x, qkv_w, qkv_b).reshape(b, n, 3, 6, 64).permute(2, 0, 3, 1, 4)
    q, k, v = qkv.unbind(0)
    return (q, k, v)


@program("aliasing", "Detached outputs: a classifier 256 -> 10 on batch 64 returns its cross-entropy loss, "
         "logits.detach() (for metrics) and features.detach() of its input",
         lambda I: [I.act(64, 256), I.index(64, high=10), I.weight(10, 256), I.weight(10, fan_in=256)])
def detached_outputs(features, target, weight, bias):
    logits = F.linear(features, weight, bias)
    return (F.cross_entropy(logits, target), logits.detach(), features.detach())


@program("aliasing", "One value returned twice plus a view of it: softmax over 16 x 1000 logits returned as "
         "(p, p, p[:, :5])",
         lambda I: [I.act(16, 1000)])
def duplicate_output(logits):
    p = torch.softmax(logits, dim=-1)
    return (p, p, p[:, :5])


@program("aliasing", "View of an intermediate that is not itself returned: 3x3 conv 64 -> 128 stride 2 on "
         "4 x 64 x 32 x 32, ReLU, flatten(1) -> [4, 32768]",
         lambda I: [I.act(4, 64, 32, 32), I.weight(128, 64, 3, 3), I.weight(128, fan_in=576)])
def flatten_output_view(x, conv_w, conv_b):
    return (F.relu(conv2d(x, conv_w, conv_b, stride=2, padding=1)).flatten(1),)


@program("aliasing", "Tied output embedding: LM head logits hidden @ emb^T (2 x 16 tokens, 5000 x 256 table) "
         "returned with emb.t(), a view of a parameter input",
         lambda I: [I.act(2, 16, 256), I.act(5000, 256)])
def tied_weight_view_output(hidden, emb):
    emb_t = emb.t()
    return (hidden @ emb_t, emb_t)


# =================================================================================================
# Miscellaneous
# =================================================================================================
@program("misc", "Reductions over ImageNet logits 32 x 1000: sum, mean, amax, argmax, logsumexp, "
         "log_softmax, var, cumsum",
         lambda I: [I.act(32, 1000)])
def reductions(logits):
    return (
        logits.sum(1),
        logits.mean(0, keepdim=True),
        logits.amax(1),
        logits.argmax(1),
        torch.logsumexp(logits, 1),
        torch.log_softmax(logits, 1),
        logits.var(1, correction=1),
        logits.cumsum(1),
        logits.sum(),
    )


# --- tracing and translation ---------------------------------------------------------------------
def contiguous_strides(sizes):
    strides, acc = [], 1
    for s in reversed(sizes):
        strides.append(acc)
        acc *= max(s, 1)
    return list(reversed(strides))


@dataclasses.dataclass(frozen=True)
class Meta:
    sizes: Tuple[int, ...]
    strides: Tuple[int, ...]
    offset: int
    dtype: torch.dtype
    device: torch.device

    @staticmethod
    def of(t):
        return Meta(tuple(t.shape), tuple(t.stride()), t.storage_offset(), t.dtype, t.device)


def tensor_type(m: Meta, requires_grad=False):
    sizes = list(m.sizes)
    text = f"{DTYPE_SHORT[m.dtype]}[{', '.join(map(str, sizes))}]"
    if list(m.strides) != contiguous_strides(sizes):
        text += f" stride=[{', '.join(map(str, m.strides))}]"
    if m.offset != 0:
        text += f" offset={m.offset}"
    if m.device.type != "cpu":
        text += f" device={m.device}"
    if requires_grad:
        text += " requires_grad"
    return text


def fmt_float(v):
    if math.isnan(v):
        return "nan"
    if math.isinf(v):
        return "inf" if v > 0 else "-inf"
    text = repr(float(v))
    return text if ("." in text or "e" in text) else text + ".0"


def snapshot(value):
    """Metadata of a node's result, taken when it is made (a later t_/unsqueeze_ of the same tensor
    must not change what was recorded)."""
    if isinstance(value, torch.Tensor):
        return Meta.of(value)
    if isinstance(value, (list, tuple)):
        return [Meta.of(v) if isinstance(v, torch.Tensor) else None for v in value]
    return None


class Recorder(torch.fx.Interpreter):
    """Runs a traced graph on real tensors and keeps every node's result's metadata."""

    def __init__(self, gm):
        super().__init__(gm)
        self.values = {}

    def run_node(self, n):
        out = super().run_node(n)
        self.values[n] = snapshot(out)
        return out


def is_mutable_call(n):
    return n.op == "call_function" and isinstance(n.target, torch._ops.OpOverload) and n.target._schema.is_mutable


def eliminate_dead_pure_nodes(gm):
    """Drops nodes whose results nobody uses and that mutate nothing. Tracing with inputs that require
    grad leaves such nodes behind (autograd's `detach` of saved outputs, F.batch_norm's empty reserve
    buffer), and the verifier rejects dead code."""
    changed = True
    while changed:
        changed = False
        for n in reversed(list(gm.graph.nodes)):
            if n.op == "call_function" and not n.users and not is_mutable_call(n):
                gm.graph.erase_node(n)
                changed = True
    gm.recompile()


class Translator:
    def __init__(self, name, gm, values, param_names, requires_grad, constants):
        self.name, self.gm, self.values = name, gm, values
        self.param_names, self.requires_grad, self.constants = param_names, requires_grad, constants
        self.names = {}  # fx node (or (node, index)) -> value name in the text form
        self.used = set()

    def fresh(self, hint):
        name, i = hint, 1
        while name in self.used:
            name, i = f"{hint}_{i}", i + 1
        self.used.add(name)
        return name

    def arg(self, a):
        if isinstance(a, torch.fx.Node):
            return "%" + self.names[a]
        if isinstance(a, bool):
            return "True" if a else "False"
        if isinstance(a, int):
            return str(a)
        if isinstance(a, float):
            return fmt_float(a)
        if a is None:
            return "None"
        if isinstance(a, torch.dtype):
            return str(a)  # torch.float32
        if isinstance(a, torch.device):
            return f'device("{a}")'
        if isinstance(a, (torch.layout, torch.memory_format)):
            return str(a)
        if isinstance(a, str):
            return '"' + a.replace("\\", "\\\\").replace('"', '\\"') + '"'
        if isinstance(a, (list, tuple)):
            return "[" + ", ".join(self.arg(x) for x in a) + "]"
        raise TypeError(f"{self.name}: cannot write argument {a!r}")

    def constant_key(self, node):
        value = getattr(self.gm, node.target)
        for key, tensor in self.constants.items():
            if tensor is value or (tensor.data_ptr() == value.data_ptr() and tensor.shape == value.shape):
                return key
        raise KeyError(f"{self.name}: closed-over tensor {node.target} {tuple(value.shape)} is not among the "
                       f"program's constants")

    def translate(self):
        nodes = list(self.gm.graph.nodes)
        placeholders = [n for n in nodes if n.op == "placeholder"]
        params = []
        for n, pname, rg in zip(placeholders, self.param_names, self.requires_grad):
            self.names[n] = self.fresh(pname)
            params.append(f"%{self.names[n]}: {tensor_type(self.values[n], rg)}")
        lines = []
        for n in nodes:
            if n.op == "placeholder":
                continue
            if n.op == "get_attr":
                key = self.constant_key(n)
                self.names[n] = self.fresh(key.replace(".", "_"))
                lines.append(f'%{self.names[n]}: {tensor_type(self.values[n])} = constant("{key}")')
            elif n.op == "call_function" and n.target is operator.getitem:
                continue  # named with its producer
            elif n.op == "call_function":
                lines.append(self.call(n))
            elif n.op == "output":
                outs = n.args[0] if isinstance(n.args[0], (list, tuple)) else [n.args[0]]
                ret = ", ".join("%" + self.names[o] for o in outs)
        body = "".join(f"  {line}\n" for line in lines)
        return f"graph {self.name}({', '.join(params)}):\n{body}  return ({ret})\n"

    @staticmethod
    def scalar_overload(op, args):
        """make_fx records `x * 0.5` as aten::mul.Tensor with a Python number where the schema says
        Tensor (eager wraps it); the IR wants the overload that takes a Scalar there."""
        schema = op._schema
        wrapped = [isinstance(a, (int, float)) and not isinstance(a, bool) and str(f.type) == "Tensor"
                   for a, f in zip(args, schema.arguments)]
        if not any(wrapped):
            return op
        packet = op.overloadpacket
        names = ["Scalar"] + [o for o in packet.overloads() if o != "Scalar"]
        for o in names:
            if not hasattr(packet, o):
                continue
            cand = getattr(packet, o)._schema
            if len(cand.arguments) != len(schema.arguments) or cand.is_mutable != schema.is_mutable:
                continue
            if any(a.kwarg_only != b.kwarg_only or a.name != b.name for a, b in zip(cand.arguments, schema.arguments)):
                if o != "Scalar":
                    continue
            ok = True
            for i, (ca, sa) in enumerate(zip(cand.arguments, schema.arguments)):
                want = "number" if i < len(wrapped) and wrapped[i] else str(sa.type)  # Scalar prints as number
                if str(ca.type) != want:
                    ok = False
                    break
            if ok:
                return getattr(packet, o)
        raise TypeError(f"no overload of {packet} takes Scalars at {wrapped}")

    def call(self, n):
        op = self.scalar_overload(n.target, n.args)
        schema = op._schema
        qual = schema.name + ("." + schema.overload_name if schema.overload_name else "")
        val = self.values[n]
        if isinstance(val, Meta):
            self.names[n] = self.fresh(n.name)
            decls = [f"%{self.names[n]}: {tensor_type(val)}"]
        else:  # a tuple or list of tensors: one declared value per element
            getitems = {u.args[1]: u for u in n.users if u.target is operator.getitem}
            decls = []
            for i, m in enumerate(val):
                if m is None:
                    raise TypeError(f"{self.name}: {n.name} returns a non-tensor at {i}")
                user = getitems.get(i)
                name = self.fresh(user.name if user is not None else f"{n.name}_out{i}")
                if user is not None:
                    self.names[user] = name
                decls.append(f"%{name}: {tensor_type(m)}")
        args = [self.arg(a) for a in n.args]
        args += [f"{k}={self.arg(v)}" for k, v in n.kwargs.items()]
        return f"{', '.join(decls)} = {qual}({', '.join(args)})"


def trace(p: Program):
    """The program's ATen graph: traced on its example inputs (requires_grad as they have it), dead
    pure nodes dropped."""
    gm = make_fx(p.fn, tracing_mode="real")(*p.make_inputs())
    eliminate_dead_pure_nodes(gm)
    return gm


# --- what a graph does to its inputs and outputs (for the README and the file headers) ----------
def _alias_source(n):
    """The argument a call's result aliases (a view op's or an in-place op's self), or None."""
    if n.op != "call_function":
        return None
    if n.target is operator.getitem:
        return n.args[0] if _alias_source(n.args[0]) is not None else None
    if not isinstance(n.target, torch._ops.OpOverload):
        return None
    schema = n.target._schema
    if not schema.returns or schema.returns[0].alias_info is None:
        return None
    for a, v in zip(schema.arguments, n.args):
        if a.alias_info is not None and isinstance(v, torch.fx.Node):
            return v
    return None


def _root(n):
    while True:
        src = _alias_source(n)
        if src is None:
            return n
        n = src


def _only_inplace_between(n, root):
    """n is root after in-place ops only (no view on the way)."""
    while n is not root:
        if not is_mutable_call(n):
            return False
        n = _alias_source(n)
    return True


@dataclasses.dataclass
class Behaviour:
    data_mutated: List[str]
    metadata_mutated: List[str]
    mutated_through_view: List[str]
    outputs: List[str]  # per output: "", "input x", "view of input x", "view of an intermediate", ...

    @property
    def mutates_inputs(self):
        return bool(self.data_mutated or self.metadata_mutated)

    @property
    def aliased_outputs(self):
        return any(self.outputs)


def behaviour(p: Program, gm) -> Behaviour:
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    pname = dict(zip(placeholders, p.input_names))
    data, meta, through_view = [], [], []
    for n in gm.graph.nodes:
        if not is_mutable_call(n):
            continue
        for a, v in zip(n.target._schema.arguments, n.args):
            if a.alias_info is None or not a.alias_info.is_write or not isinstance(v, torch.fx.Node):
                continue
            root = _root(v)
            if root.op != "placeholder":
                continue
            name = pname[root]
            kind = meta if n.target._schema.name.split("::")[1] in METADATA_MUTATING_OPS else data
            if name not in kind:
                kind.append(name)
            node = v
            while node is not root:  # through a view (not only through earlier in-place ops)?
                if not is_mutable_call(node) and node.target is not operator.getitem:
                    if name not in through_view:
                        through_view.append(name)
                    break
                node = _alias_source(node)
    out_node = next(n for n in gm.graph.nodes if n.op == "output")
    outs = list(out_node.args[0]) if isinstance(out_node.args[0], (list, tuple)) else [out_node.args[0]]
    roots = [_root(o) for o in outs]
    # An output reached from its root through in-place ops only is that tensor itself, not a view.
    plain = [o is r or _only_inplace_between(o, r) for o, r in zip(outs, roots)]
    kinds = []
    for i, (o, r) in enumerate(zip(outs, roots)):
        shared = [j for j, r2 in enumerate(roots) if j != i and r2 is r]
        if r.op == "placeholder":
            if o is r:
                kinds.append(f"input {pname[r]}")
            elif plain[i]:
                kinds.append(f"input {pname[r]} (mutated in place)")
            else:
                kinds.append(f"view of input {pname[r]}")
        elif not plain[i]:
            base = [j for j in shared if plain[j]]
            kinds.append(f"view of output {base[0]}" if base else "view of an intermediate")
        elif shared:
            same = [j for j in shared if plain[j]]
            viewed = [j for j in shared if not plain[j]]
            parts = ([f"same tensor as output {same[0]}"] if same else []) + \
                ([f"viewed by output {', '.join(map(str, viewed))}"] if viewed else [])
            kinds.append(" and ".join(parts))
        else:
            kinds.append("")
    return Behaviour(data, meta, through_view, kinds)


def header(p: Program, b: Behaviour):
    lines = [f"# {p.description}."]
    facts = []
    if b.data_mutated:
        facts.append("mutates input data: " + ", ".join(
            n + (" (through a view)" if n in b.mutated_through_view else "") for n in b.data_mutated))
    if b.metadata_mutated:
        facts.append("mutates input metadata: " + ", ".join(b.metadata_mutated))
    if b.aliased_outputs:
        facts.append("outputs aliasing: " + ", ".join(f"{i}: {k}" for i, k in enumerate(b.outputs) if k))
    if facts:
        lines.append("# " + "; ".join(facts) + ".")
    lines.append(f"# Generated by examples/generate.py (torch {torch.__version__.split('+')[0]}); "
                 "edit that, not this file.")
    return "".join(line + "\n" for line in lines)


def generate(p: Program):
    """(the .aotg text, Behaviour) of one program."""
    gm = trace(p)
    recorder = Recorder(gm)
    inputs = p.make_inputs()
    requires_grad = [t.requires_grad for t in inputs]
    with torch.no_grad():
        recorder.run(*inputs)
    b = behaviour(p, gm)
    return header(p, b) + Translator(p.name, gm, recorder.values, p.input_names, requires_grad,
                                     p.constants).translate(), b


# --- README ---------------------------------------------------------------------------------------
CATEGORY_TITLES = {
    "mlp": "MLPs", "cnn": "CNN blocks", "transformer": "Transformer layers", "rnn": "RNN cells",
    "norm": "Normalization layers", "embedding": "Embeddings", "loss": "Losses (scalar outputs)",
    "mutation": "Input mutations", "aliasing": "Aliased outputs", "misc": "Miscellaneous",
}

README_INTRO = """\
# Example corpus

`examples/*.aotg` are PyTorch programs with real model shapes in aotpipe's IR text form
([docs/ir.md](../docs/ir.md)), written by [`generate.py`](generate.py) (do not edit them by hand;
this README is generated too). Each program is a Python function traced to ATen ops with `make_fx`
**without functionalization**, so in-place ops on inputs and intermediates stay in the graph for the
compiler's metadata stage to find. The function is traced on its example inputs, whose parameters and
activations require grad (marked ` requires_grad` on the input's TensorMeta; buffers, indices and
targets are not), then run once on real CPU tensors to record every value's sizes, strides, storage
offset and dtype, which `aotpipe run --check-meta` compares with what the interpreter produces.
Tensors a function closes over (LSTM weights, causal masks, frequency tables) become named constants,
`constant("key")`; `aotpipe run` binds random tensors to them.

Every program is valid for AOTAutograd: in-place ops are applied only to inputs that do not
require grad (buffers, optimizer state, caches) or to intermediates, never to a leaf that requires
grad (`generate.py --validate` checks this by running each program eagerly with a backward pass and
through Python AOTAutograd, `aot_function` with the identity compiler, comparing outputs and input
mutations with eager).

## Regenerating and checking
```
source ~/.cache/aotpipe/env.sh                  # or: source "$(scripts/setup)"
$AOTPIPE_PYTHON examples/generate.py            # rewrites examples/*.aotg and this README
$AOTPIPE_PYTHON examples/generate.py --check    # exit 1 if any file would change (CI)
$AOTPIPE_PYTHON examples/generate.py --validate # eager forward/backward + Python AOTAutograd per program
build/tools/aotpipe/aotpipe run examples/ --check-meta
```
The output depends only on the torch version (2.11.0), not on random values: running it twice
gives identical files.

## Using the programs from Python
```python
import sys; sys.path.insert(0, "examples")
import generate
for p in generate.programs():       # Program(name, category, description, fn, make_inputs, constants)
    args = p.make_inputs()          # fresh example inputs, seeded by the program's name
    outs = p.fn(*args)              # always a tuple of tensors
```
`make_inputs()` returns new tensors on every call (programs with input mutations change them), with
realistic values: class targets and indices in range, positive running variances. (`aotpipe run`
instead draws floats from a normal distribution and integers in [0, 8), so every index input
indexes a table of at least 8 rows.)

To run a program through Python AOTAutograd use `generate.python_aot_function(p, fw_compiler,
bw_compiler)` rather than `functorch.compile.aot_function(p.fn, ...)` directly: the programs with
closed-over tensors (`p.constants` not empty: `lstm_cell`, `gpt2_causal_attention`,
`llama_gqa_attention`, `timestep_embedding_mlp`) fail in plain `aot_function`, whose FakeTensorMode
refuses real tensors it did not make; the helper calls them inside a `TracingContext` whose
FakeTensorMode accepts them.

## Notes on formulations
- Training-mode batch norm with running statistics is written as `aten::_native_batch_norm_legit`,
  whose schema marks `running_mean`/`running_var` as mutated (`Tensor(a!)`). `F.batch_norm` in
  training mode traces to `aten::native_batch_norm`, which updates them too but whose schema does not
  say so (a mutation no schema-based analysis can see), so no program uses it with running stats.
- Tracing with inputs that require grad leaves dead nodes (autograd's `detach` of saved outputs,
  `F.batch_norm`'s empty reserve buffer); generate.py drops unused nodes that mutate nothing, since
  the verifier rejects dead code.
- An input whose metadata is mutated (`t_`, `unsqueeze_`) is only used in ops that do not save it
  for backward: Python AOTAutograd replays the metadata mutation on the real input after the
  forward, which bumps its version counter and makes a backward that saved it fail
  ("modified by an inplace operation").
- An input is never mutated after an op saved it for backward (eager autograd rejects that), hence
  the double-buffered state of `rnn_state_copy_`.

## Programs
Mutation column: *data* (in-place op writes an input), *meta* (an input's sizes/strides change in
place: `t_`, `unsqueeze_`), *view* (written through a view of the input). Aliasing column: which
outputs alias an input, another output or an intermediate (output indices from 0).
"""


def _shape_of(m: Meta):
    return "[" + ", ".join(map(str, m.sizes)) + "]" + ("" if m.dtype == torch.float32 else f" {DTYPE_SHORT[m.dtype]}")


def readme(entries):
    out = [README_INTRO]
    counts = {}
    for p, _, _ in entries:
        counts[p.category] = counts.get(p.category, 0) + 1
    out.append(f"\n{len(entries)} programs: " + ", ".join(f"{CATEGORY_TITLES[c].split(' (')[0]} {n}"
                                                        for c, n in counts.items()) + ".\n")
    for cat in CATEGORY_TITLES:
        rows = [(p, b, metas) for p, b, metas in entries if p.category == cat]
        if not rows:
            continue
        out.append(f"\n### {CATEGORY_TITLES[cat]}\n")
        out.append("| program | what it models | inputs (* requires grad) | mutation | aliasing |\n")
        out.append("|---|---|---|---|---|\n")
        for p, b, metas in rows:
            ins = ", ".join(f"{n}{'*' if rg else ''} {_shape_of(m)}" for n, (m, rg) in zip(p.input_names, metas))
            mut = []
            for name in b.data_mutated:
                mut.append(f"data {name}" + (" (view)" if name in b.mutated_through_view else ""))
            mut += [f"meta {name}" for name in b.metadata_mutated]
            alias = [f"{i}: {k}" for i, k in enumerate(b.outputs) if k]
            desc = p.description.replace("|", "\\|")
            out.append(f"| [`{p.name}`]({p.name}.aotg) | {desc} | {ins} | {'; '.join(mut) or '-'} | "
                       f"{'; '.join(alias) or '-'} |\n")
    return "".join(out)


# --- Python AOTAutograd on a program --------------------------------------------------------------
def python_aot_function(p: Program, fw_compiler, bw_compiler=None, **kwargs):
    """functorch.compile.aot_function(p.fn, ...) usable on every program. Programs that close over
    tensors (p.constants) cannot go through plain aot_function, whose FakeTensorMode refuses real
    tensors it did not make; for those, each call runs inside a TracingContext whose FakeTensorMode
    accepts them (they become constants of the traced graph, as Dynamo's lifted attributes would)."""
    from functorch.compile import aot_function
    from torch._guards import TracingContext, tracing
    from torch._subclasses.fake_tensor import FakeTensorMode

    compiled = aot_function(p.fn, fw_compiler=fw_compiler, bw_compiler=bw_compiler, **kwargs)
    if not p.constants:
        return compiled

    def call(*args):
        with tracing(TracingContext(FakeTensorMode(allow_non_fake_inputs=True))):
            return compiled(*args)
    return call


# --- validation (optional) -----------------------------------------------------------------------
def _clone_inputs(args):
    return [a.detach().clone().requires_grad_(a.requires_grad) for a in args]


def validate(p: Program):
    """Eager forward + backward, then Python AOTAutograd (identity compilers); raises on a mismatch."""
    from functorch.compile import nop

    def run(fn, args):
        outs = fn(*args)
        assert isinstance(outs, (tuple, list)), f"{p.name}: must return a tuple"
        outs = tuple(outs)
        diff = [o for o in outs if isinstance(o, torch.Tensor) and o.requires_grad]
        if diff:
            sum(o.float().sum() for o in diff).backward()
        return outs

    eager_args = p.make_inputs()
    eager = run(p.fn, eager_args)
    for a, n in zip(eager_args, p.input_names):
        if a.is_leaf and a.requires_grad and a.grad is None:
            print(f"  note: {p.name}: input {n} requires grad but gets no gradient")
    aot_args = p.make_inputs()
    aot = run(python_aot_function(p, fw_compiler=nop, bw_compiler=nop), aot_args)
    for i, (e, a) in enumerate(zip(eager, aot)):
        assert e.shape == a.shape and e.dtype == a.dtype, f"{p.name}: output {i} metadata differs"
        torch.testing.assert_close(a.detach(), e.detach(), rtol=1e-4, atol=1e-4, equal_nan=True,
                                   msg=lambda m: f"{p.name}: output {i}: {m}")
    for n, e, a in zip(p.input_names, eager_args, aot_args):
        assert e.is_leaf, f"{p.name}: input {n} stopped being a leaf (an in-place op with an operand that requires grad)"
        assert e.shape == a.shape and e.stride() == a.stride(), f"{p.name}: input {n} metadata differs after the call"
        torch.testing.assert_close(a.detach(), e.detach(), rtol=1e-4, atol=1e-4, equal_nan=True,
                                   msg=lambda m: f"{p.name}: input {n} after the call: {m}")
        if e.grad is not None:
            torch.testing.assert_close(a.grad, e.grad, rtol=1e-3, atol=1e-3, equal_nan=True,
                                       msg=lambda m: f"{p.name}: gradient of {n}: {m}")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true", help="only check that the files are up to date")
    parser.add_argument("--validate", action="store_true",
                        help="also run every program eagerly (with backward) and through Python AOTAutograd")
    parser.add_argument("--out", type=pathlib.Path, default=HERE, help="output directory (default: examples/)")
    parser.add_argument("--list", action="store_true", help="print the programs and exit")
    opts = parser.parse_args()
    if opts.list:
        for p in programs():
            print(f"{p.name:32} {p.category:12} {p.description}")
        return 0
    names = [p.name for p in programs()]
    assert len(names) == len(set(names)), "duplicate program names"
    stale, entries, failed = [], [], []
    files = {}
    for p in programs():
        text, b = generate(p)
        inputs = p.make_inputs()
        entries.append((p, b, [(Meta.of(t), t.requires_grad) for t in inputs]))
        files[f"{p.name}.aotg"] = text
        if opts.validate:
            try:
                validate(p)
                print(f"validated {p.name}")
            except Exception as e:  # report all, fail at the end
                failed.append(p.name)
                print(f"FAILED {p.name}: {type(e).__name__}: {e}", file=sys.stderr)
    files["README.md"] = readme(entries)
    for fname, text in files.items():
        path = opts.out / fname
        if opts.check:
            if not path.exists() or path.read_text() != text:
                stale.append(path)
        else:
            if not path.exists() or path.read_text() != text:
                path.write_text(text)
                print(path)
    if opts.check or opts.out == HERE:
        known = set(files)
        extra = [f for f in sorted(opts.out.glob("*.aotg")) if f.name not in known]
        if extra:
            print("not written by generate.py (remove them):", *map(str, extra), file=sys.stderr)
            stale += extra
    if failed:
        print("validation failed:", *failed, file=sys.stderr)
    if stale:
        print("out of date:", *map(str, stale), file=sys.stderr)
    return 1 if stale and opts.check or failed else 0


if __name__ == "__main__":
    sys.exit(main())
