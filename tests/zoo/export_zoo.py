"""The model zoo: third-party models (torchvision, timm, Hugging Face transformers) at reduced
sizes, exported with torch.export, with what eager PyTorch computes for them.

For every model NAME this writes into --out DIR:
  NAME.train.pt2     torch.export.save(torch.export.export(wrapper.train(), inputs))
  NAME.eval.pt2      the same wrapper (a fresh copy of the initial weights) in eval mode
  NAME.expected.pt   torch.save of a dict of plain lists/dicts of tensors (read from C++ with
                     torch::jit::pickle_load):
                       "inputs"          the user inputs, in the order the export takes them
                       "train_outputs"   the outputs of one training-mode forward (fp32)
                       "grad_outputs"    the seeds fed to torch.autograd.backward (one per
                                         output; a 0-element tensor for an output that gets none)
                       "grads"           {parameter FQN: .grad} under every name of
                                         named_parameters(remove_duplicate=False)
                       "no_grad"         FQNs of parameters whose .grad stayed None
                       "buffers"         {buffer FQN: value after the step}, for the buffers the
                                         export lifts as BUFFER inputs
                       "train_outputs64", "grads64", "buffers64", "eval_outputs64"
                                         the same on a float64 copy (absent if that failed)
                       "eval_outputs"    outputs of the eval-mode model under no_grad
                       "training"        1
  manifest.json      versions, and per model: name, library, constructor, status ("ok",
                     "export_failed", "fp64_failed"), error, train_ops, eval_ops, num_params,
                     tied, eager_train_ms, eager_eval_ms (and informative extras: seconds,
                     export_seconds, higher_order_ops, export_check_max_abs_diff, reinit_zero,
                     input_shapes, num_param_names, num_param_values), and
                     export_backward_error: the first line of the error PyTorch's own
                     ep.module() raises in a training step's backward, for a program torch.export
                     made not differentiable (a custom autograd.Function's backward dropped)

Models are in training mode with every dropout / drop-path probability 0; BatchNorm stays in
training mode. A model torch.export cannot export (or whose export torch.export.save cannot
write) stays in the manifest with status "export_failed" and the error.

Usage: $AOTPIPE_PYTHON tests/zoo/export_zoo.py --out DIR [--only NAME[,NAME...]] [--list]
(scripts/zoo-export runs it once per version of this file and of the libraries, and caches the
result outside the clone.)
"""
import argparse
import copy
import json
import os
import re
import statistics
import sys
import time
import traceback
import warnings
import zipfile
import zlib

import torch
import torch.nn as nn
import torch.utils._pytree as pytree

warnings.filterwarnings("ignore")

IMG = 32
BATCH = 2
SEQ = 8
VOCAB = 100


# ----------------------------------------------------------------------------------------------
# Helpers
# ----------------------------------------------------------------------------------------------


class ZooWrapper(nn.Module):
    """Holds the third-party model as `m`; forward takes only tensors and returns a tensor or a
    flat tuple of tensors (every tensor leaf of what `call(m, *args)` returns, in order)."""

    def __init__(self, model, call=None, after_train=None):
        super().__init__()
        self.m = model
        self._call = call
        self._after_train = after_train

    def train(self, mode=True):
        super().train(mode)
        if mode and self._after_train is not None:
            self._after_train(self.m)
        return self

    def forward(self, *args):
        out = self._call(self.m, *args) if self._call is not None else self.m(*args)
        leaves = [x for x in pytree.tree_leaves(out) if isinstance(x, torch.Tensor)]
        return leaves[0] if len(leaves) == 1 else tuple(leaves)


def zero_dropout(model):
    """Every dropout / drop-path / stochastic-depth probability to 0 (most are already 0 from
    the constructor's arguments; this catches the hard-coded ones)."""
    for mod in model.modules():
        if isinstance(mod, nn.modules.dropout._DropoutNd):
            mod.p = 0.0
        for attr in ("drop_prob", "drop_path_prob", "drop_rate", "dropout", "dropout_p", "dropout_rate",
                     "attention_dropout", "activation_dropout", "layerdrop"):
            v = getattr(mod, attr, None)
            if isinstance(v, float) and v != 0.0:
                setattr(mod, attr, 0.0)
        if type(mod).__name__ == "StochasticDepth":  # torchvision.ops.StochasticDepth
            mod.p = 0.0
    return model


NORMS = (nn.modules.batchnorm._NormBase, nn.GroupNorm, nn.LayerNorm)


def reinit_all_zero_weights(model, seed):
    """A weight initialised to all zeros makes every gradient upstream of it zero (torchvision
    ViT's head; timm's zero_init_last: the last norm's gamma of each residual block), so the step
    would test little: such a weight matrix gets small random values, such a norm's weight ones."""
    names = []
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for mod_name, mod in model.named_modules():
            for p_name, p in mod.named_parameters(recurse=False):
                if p.numel() == 0 or p.any():
                    continue
                if p.dim() >= 2:
                    p.copy_(torch.randn(p.shape, generator=g) * 0.02)
                elif isinstance(mod, NORMS) and p_name == "weight":
                    p.fill_(1.0)
                else:
                    continue
                names.append(f"{mod_name}.{p_name}" if mod_name else p_name)
    return names


RANDOM_OPS = ("rand", "randn", "randint", "randperm", "bernoulli", "normal", "uniform", "multinomial",
              "native_dropout", "dropout", "feature_dropout", "alpha_dropout", "rrelu")


def random_ops(ep):
    """Random ops in the exported graph (HOP subgraphs included): a dropout with p == 0 and a draw
    nobody reads (Wav2Vec2's encoder draws its LayerDrop numbers in eval mode too) are harmless;
    anything else makes eager's answer unrepeatable."""
    found = []
    for gm in ep.graph_module.modules():
        graph = getattr(gm, "graph", None)
        if graph is None:
            continue
        for n in graph.nodes:
            if n.op != "call_function" or not hasattr(n.target, "_schema"):
                continue
            base = n.target._schema.name.split("::")[-1]
            if base not in RANDOM_OPS:
                continue
            if base.endswith("dropout") and len(n.args) > 1 and n.args[1] == 0.0:
                continue
            if not n.users:
                continue
            found.append(f"{n.target}{tuple(a for a in n.args[1:] if not isinstance(a, torch.fx.Node))}")
    return found


def gen(seed):
    return torch.Generator().manual_seed(seed)


def images(h=IMG, w=None, c=3):
    w = w or h
    return lambda: (torch.randn(BATCH, c, h, w, generator=gen(1)),)


def tokens(vocab=VOCAB, seq=SEQ, mask=False, decoder=False, low=3):
    """Token ids (int64); optionally an attention mask (int64, the second sample padded in its
    last two positions) and decoder input ids."""

    def make():
        g = gen(2)
        out = [torch.randint(low, vocab, (BATCH, seq), generator=g)]
        if mask:
            m = torch.ones(BATCH, seq, dtype=torch.long)
            m[1, -2:] = 0
            out.append(m)
        if decoder:
            out.append(torch.randint(low, vocab, (BATCH, seq), generator=g))
        return tuple(out)

    return make


def as_list(out):
    return list(out) if isinstance(out, (tuple, list)) else [out]


def clone_inputs(inputs):
    return [x.clone() for x in inputs]


def to64(inputs):
    return [x.double() if x.is_floating_point() else x.clone() for x in inputs]


def first_lines(exc, n=2, limit=600):
    """The exception's first lines, and the third-party source line that raised it when the
    message names one (torch.export's data-dependent errors do: `File "...", line N`)."""
    text = f"{type(exc).__name__}: {exc}".strip()
    lines = [ln for ln in text.splitlines() if ln.strip()]
    out = lines[:n]
    for i, ln in enumerate(lines):
        m = re.search(r'File "(?:.*/site-packages/)?([^"]+)", line (\d+)', ln)
        if m and i + 1 < len(lines) and "torch/" not in m.group(1):
            out.append(f"at {m.group(1)}:{m.group(2)}: {lines[i + 1].strip()}")
            break
    return "\n".join(out)[:limit]


def call_function_count(ep):
    return sum(1 for n in ep.graph.nodes if n.op == "call_function")


def higher_order_ops(path):
    """Targets starting with torch.ops.higher_order in the saved archive's models/*.json."""
    found = set()
    with zipfile.ZipFile(path) as z:
        for name in z.namelist():
            if re.search(r"(^|/)models/[^/]*\.json$", name):
                for m in re.finditer(r'"(torch\.ops\.higher_order\.[A-Za-z0-9_.]+)"', z.read(name).decode()):
                    found.add(m.group(1))
    return sorted(found)


def data_dependent_symbols(ep):
    """The export's unbacked symbols: sizes read from tensor values (nonzero, item), as in a
    mixture of experts' routing. aotpipe refuses them at load (docs/export.md)."""
    from torch.fx.experimental.symbolic_shapes import free_unbacked_symbols
    found = set()
    for n in ep.graph.nodes:
        for v in pytree.tree_leaves(n.meta.get("val")):
            if isinstance(v, (torch.Tensor, torch.SymInt, torch.SymBool)):
                found |= free_unbacked_symbols(v)
    return sorted(str(s) for s in found)


def tied_pairs(model):
    by_id = {}
    for name, p in model.named_parameters(remove_duplicate=False):
        by_id.setdefault(id(p), []).append(name)
    return [[names[0], other] for names in by_id.values() if len(names) > 1 for other in names[1:]]


# ----------------------------------------------------------------------------------------------
# The models: (name, library, constructor string, make_model, make_inputs). make_model returns
# the ZooWrapper; it runs after torch.manual_seed, so its random initialisation is fixed.
# ----------------------------------------------------------------------------------------------


class NnRecurrentTagger(nn.Module):
    """Embedding, a two-layer bidirectional LSTM, then a GRU: torch.export writes their cells out
    step by step (addmm, unsafe_split into gates, sigmoid, tanh)."""

    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(VOCAB, 16)
        self.lstm = nn.LSTM(16, 24, num_layers=2, batch_first=True, bidirectional=True)
        self.gru = nn.GRU(48, 16, batch_first=True)
        self.head = nn.Linear(16, 5)

    def forward(self, ids):
        x, _ = self.lstm(self.emb(ids))
        x, h = self.gru(x)
        return self.head(x), h


class NnTinyUNet(nn.Module):
    """An encoder-decoder of the layers segmentation models use that the zoo's libraries do not:
    InstanceNorm, GroupNorm, reflect padding, ConvTranspose2d, PixelShuffle, ELU, LeakyReLU,
    bilinear interpolation with align_corners, log_softmax."""

    def __init__(self):
        super().__init__()
        self.down = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.InstanceNorm2d(8, affine=True), nn.LeakyReLU(0.1))
        self.pool = nn.MaxPool2d(2)
        self.mid = nn.Sequential(nn.Conv2d(8, 16, 3, padding=1, padding_mode="reflect"), nn.GroupNorm(4, 16), nn.ELU())
        self.up = nn.ConvTranspose2d(16, 8, 2, stride=2)
        self.shuffle = nn.Sequential(nn.Conv2d(16, 12, 1), nn.PixelShuffle(2))
        self.out = nn.Conv2d(3, 2, 3, padding=1)

    def forward(self, x):
        d = self.down(x)
        u = torch.cat([self.up(self.mid(self.pool(d))), d], 1)
        s = nn.functional.interpolate(self.shuffle(u), size=x.shape[-2:], mode="bilinear", align_corners=True)
        return torch.log_softmax(self.out(s), dim=1)


class NnTransformerEncoder(nn.Module):
    """torch.nn.TransformerEncoder (pre-norm, GELU) over embeddings, with a key padding mask."""

    def __init__(self):
        super().__init__()
        layer = nn.TransformerEncoderLayer(32, 4, 64, dropout=0.0, batch_first=True, norm_first=True,
                                           activation="gelu")
        self.enc = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
        self.emb = nn.Embedding(VOCAB, 32)

    def forward(self, ids, mask):
        return self.enc(self.emb(ids), src_key_padding_mask=mask == 0)


def torch_nn_models():
    return [
        ("nn_lstm_gru", "torch.nn", "NnRecurrentTagger: Embedding, LSTM(16, 24, 2 layers, bidirectional), GRU(48, 16)",
         lambda: ZooWrapper(NnRecurrentTagger()), tokens()),
        ("nn_unet", "torch.nn", "NnTinyUNet: InstanceNorm, GroupNorm, ConvTranspose2d, PixelShuffle, interpolate",
         lambda: ZooWrapper(NnTinyUNet()), images(16)),
        ("nn_transformer_encoder", "torch.nn",
         "NnTransformerEncoder: TransformerEncoder(TransformerEncoderLayer(32, 4, 64, norm_first=True), 2)",
         lambda: ZooWrapper(NnTransformerEncoder()), tokens(mask=True)),
    ]


def tv(ctor, **kw):
    return lambda: ZooWrapper(ctor(**kw))


def torchvision_models():
    import torchvision
    from torchvision.models import (ResNet, VisionTransformer, SwinTransformer, DenseNet, ConvNeXt, RegNet,
                                    EfficientNet, MaxVit)
    from torchvision.models.resnet import BasicBlock, Bottleneck
    from torchvision.models.convnext import CNBlockConfig
    from torchvision.models.regnet import BlockParams
    from torchvision.models.efficientnet import _efficientnet_conf
    from torchvision.models.segmentation.lraspp import _lraspp_mobilenetv3
    from torchvision.models.detection.backbone_utils import BackboneWithFPN
    from torchvision.models.video import VideoResNet
    from torchvision.models.video.resnet import BasicBlock as VideoBasicBlock, Conv2Plus1D, R2Plus1dStem
    from torchvision.ops.misc import FrozenBatchNorm2d
    from torchvision.ops.feature_pyramid_network import LastLevelMaxPool
    M = torchvision.models

    def efficientnet_b0_half():
        setting, last_channel = _efficientnet_conf("efficientnet_b0", width_mult=0.5, depth_mult=0.5)
        return ZooWrapper(EfficientNet(setting, dropout=0.0, stochastic_depth_prob=0.0, num_classes=10,
                                       last_channel=last_channel))

    def regnet_y_small():
        params = BlockParams.from_init_params(depth=4, w_0=16, w_a=8.0, w_m=2.0, group_width=8, se_ratio=0.25)
        return ZooWrapper(RegNet(params, num_classes=10, stem_width=16))

    def lraspp():
        backbone = M.mobilenet_v3_large(weights=None, dilated=True, width_mult=0.5)
        return ZooWrapper(_lraspp_mobilenetv3(backbone, num_classes=4), lambda m, x: m(x)["out"])

    def r2plus1d_two_layers():
        # R(2+1)D's stem and first two stages: its widths are fixed, and layer3/4 hold 94% of its
        # 12.5M parameters without adding a kind of op.
        net = VideoResNet(VideoBasicBlock, [Conv2Plus1D] * 4, [1, 1, 1, 1], R2Plus1dStem, num_classes=5)
        net.layer3, net.layer4, net.fc = nn.Identity(), nn.Identity(), nn.Linear(128, 5)
        return ZooWrapper(net)

    def googlenet_small_aux():
        # GoogLeNet with its two auxiliary heads (three outputs in training), their 2048x1024
        # layers narrowed to 2048x64: 4M parameters fewer, the same ops.
        net = M.googlenet(num_classes=10, aux_logits=True, init_weights=True, dropout=0.0, dropout_aux=0.0)
        for aux in (net.aux1, net.aux2):
            aux.fc1, aux.fc2 = nn.Linear(2048, 64), nn.Linear(64, 10)
        return ZooWrapper(net)

    def fpn_backbone():
        body = ResNet(BasicBlock, [1, 1, 1, 1], norm_layer=FrozenBatchNorm2d)
        fpn = BackboneWithFPN(body, return_layers={"layer1": "0", "layer2": "1", "layer3": "2"},
                              in_channels_list=[64, 128, 256], out_channels=32, extra_blocks=LastLevelMaxPool())
        return ZooWrapper(fpn, lambda m, x: tuple(m(x).values()))

    return [
        ("tv_resnet18_l1111", "torchvision", "torchvision.models.ResNet(BasicBlock, [1,1,1,1], num_classes=10)",
         tv(ResNet, block=BasicBlock, layers=[1, 1, 1, 1], num_classes=10), images(64)),
        ("tv_resnext_l1111", "torchvision",
         "torchvision.models.ResNet(Bottleneck, [1,1,1,1], groups=8, width_per_group=4, num_classes=10)",
         tv(ResNet, block=Bottleneck, layers=[1, 1, 1, 1], groups=8, width_per_group=4, num_classes=10), images(64)),
        ("tv_mobilenet_v2", "torchvision", "torchvision.models.mobilenet_v2(width_mult=0.5, num_classes=10, dropout=0)",
         tv(M.mobilenet_v2, width_mult=0.5, num_classes=10, dropout=0.0), images(64)),
        ("tv_mobilenet_v3_small", "torchvision",
         "torchvision.models.mobilenet_v3_small(width_mult=0.5, num_classes=10, dropout=0)",
         tv(M.mobilenet_v3_small, width_mult=0.5, num_classes=10, dropout=0.0), images(64)),
        ("tv_efficientnet_b0", "torchvision",
         "torchvision.models.EfficientNet(_efficientnet_conf('efficientnet_b0', width_mult=0.5, depth_mult=0.5), "
         "num_classes=10, dropout=0, stochastic_depth_prob=0)", efficientnet_b0_half, images(64)),
        ("tv_regnet_y", "torchvision",
         "torchvision.models.RegNet(BlockParams.from_init_params(depth=4, w_0=16, w_a=8, w_m=2, group_width=8, "
         "se_ratio=0.25), stem_width=16, num_classes=10)", regnet_y_small, images(64)),
        ("tv_convnext", "torchvision",
         "torchvision.models.ConvNeXt([CNBlockConfig(16,32,2), CNBlockConfig(32,None,1)], layer_scale=1.0, "
         "num_classes=10)",
         tv(ConvNeXt, block_setting=[CNBlockConfig(16, 32, 2), CNBlockConfig(32, None, 1)], stochastic_depth_prob=0.0,
            layer_scale=1.0, num_classes=10), images(32)),
        ("tv_vit", "torchvision",
         "torchvision.models.VisionTransformer(image_size=32, patch_size=8, num_layers=2, num_heads=2, "
         "hidden_dim=32, mlp_dim=64, num_classes=10)",
         tv(VisionTransformer, image_size=32, patch_size=8, num_layers=2, num_heads=2, hidden_dim=32, mlp_dim=64,
            num_classes=10), images(32)),
        ("tv_swin", "torchvision",
         "torchvision.models.SwinTransformer(patch_size=[4,4], embed_dim=16, depths=[2,2], num_heads=[2,4], "
         "window_size=[4,4], num_classes=10)",
         tv(SwinTransformer, patch_size=[4, 4], embed_dim=16, depths=[2, 2], num_heads=[2, 4], window_size=[4, 4],
            stochastic_depth_prob=0.0, num_classes=10), images(32)),
        ("tv_densenet", "torchvision",
         "torchvision.models.DenseNet(growth_rate=8, block_config=(2,2), num_init_features=16, num_classes=10)",
         tv(DenseNet, growth_rate=8, block_config=(2, 2), num_init_features=16, num_classes=10), images(32)),
        ("tv_shufflenet_v2_x0_5", "torchvision", "torchvision.models.shufflenet_v2_x0_5(num_classes=10)",
         tv(M.shufflenet_v2_x0_5, num_classes=10), images(64)),
        ("tv_squeezenet1_1", "torchvision", "torchvision.models.squeezenet1_1(num_classes=10, dropout=0)",
         tv(M.squeezenet1_1, num_classes=10, dropout=0.0), images(64)),
        ("tv_mnasnet0_5", "torchvision", "torchvision.models.mnasnet0_5(num_classes=10, dropout=0)",
         tv(M.mnasnet0_5, num_classes=10, dropout=0.0), images(64)),
        ("tv_maxvit", "torchvision",
         "torchvision.models.MaxVit(input_size=(32,32), stem_channels=16, partition_size=2, block_channels=[16,32], "
         "block_layers=[1,1], head_dim=8, num_classes=10)",
         tv(MaxVit, input_size=(32, 32), stem_channels=16, partition_size=2, block_channels=[16, 32],
            block_layers=[1, 1], head_dim=8, stochastic_depth_prob=0.0, num_classes=10), images(32)),
        ("tv_lraspp_mobilenet_v3", "torchvision",
         "torchvision.models.segmentation LRASPP(mobilenet_v3_large(width_mult=0.5, dilated=True), num_classes=4)['out']",
         lraspp, images(64)),
        ("tv_fpn_resnet", "torchvision",
         "torchvision.models.detection.backbone_utils.BackboneWithFPN(ResNet(BasicBlock, [1,1,1,1], "
         "norm_layer=FrozenBatchNorm2d), layer1..3, out_channels=32, LastLevelMaxPool())",
         fpn_backbone, images(64)),
        ("tv_r2plus1d", "torchvision",
         "torchvision.models.video.VideoResNet(BasicBlock, [Conv2Plus1D]*4, [1,1,1,1], R2Plus1dStem), layer3 and "
         "layer4 removed, fc 128->5", r2plus1d_two_layers, lambda: (torch.randn(BATCH, 3, 4, 16, 16, generator=gen(1)),)),
        ("tv_googlenet", "torchvision",
         "torchvision.models.googlenet(num_classes=10, aux_logits=True, init_weights=True, dropout=0, dropout_aux=0), "
         "aux fc1 2048->64", googlenet_small_aux, images(64)),
    ]


def timm_models():
    import timm

    def create(name, **kw):
        return lambda: ZooWrapper(timm.create_model(name, pretrained=False, **kw))

    def ctor(name, **kw):
        args = ", ".join([repr(name)] + [f"{k}={v!r}" for k, v in kw.items()])
        return f"timm.create_model({args})"

    specs = [
        ("timm_convnext_atto", "convnext_atto",
         dict(num_classes=10, depths=(1, 1, 2, 1), dims=(16, 32, 48, 64), ls_init_value=0.1, drop_path_rate=0.0), 64),
        ("timm_vit_tiny", "vit_tiny_patch16_224", dict(img_size=32, patch_size=8, depth=2, num_classes=10), 32),
        ("timm_deit_tiny_distilled", "deit_tiny_distilled_patch16_224",
         dict(img_size=32, patch_size=8, depth=2, embed_dim=48, num_heads=3, num_classes=10), 32),
        # EfficientNet-B0's builder fixes its width and depth multipliers; tinynet_e is the same
        # generator (_gen_efficientnet: MBConv, SE, SiLU) at multipliers 0.51 and 0.6.
        ("timm_efficientnet_tinynet_e", "tinynet_e", dict(num_classes=10, drop_rate=0.0, drop_path_rate=0.0), 64),
        # TensorFlow "same" padding (padding computed from the input's shape), SE, hard-swish.
        ("timm_tf_mobilenetv3_small_075", "tf_mobilenetv3_small_075",
         dict(num_classes=10, drop_rate=0.0, drop_path_rate=0.0), 64),
        ("timm_resnet18d", "resnet18d",
         dict(num_classes=10, channels=(16, 32, 64, 128), stem_width=16, zero_init_last=False), 64),
        ("timm_resnet26d", "resnet26d",
         dict(num_classes=10, channels=(16, 32, 64, 128), stem_width=16, zero_init_last=False), 64),
        ("timm_regnetx_002", "regnetx_002", dict(num_classes=10, depth=8), 64),
        ("timm_ghostnet_050", "ghostnet_050", dict(num_classes=10), 64),
        ("timm_cait", "cait_xxs24_224",
         dict(img_size=32, patch_size=8, depth=2, depth_token_only=1, embed_dim=48, num_heads=4, init_values=0.1,
              num_classes=10), 32),
        ("timm_mobilevit_xxs", "mobilevit_xxs", dict(num_classes=10), 64),
        ("timm_swin", "swin_tiny_patch4_window7_224",
         dict(img_size=32, window_size=4, embed_dim=16, depths=(2, 2), num_heads=(2, 4), num_classes=10), 32),
        # Attention biases gathered by an index buffer; hard-swish; BatchNorm on linear layers.
        ("timm_levit_128s", "levit_128s",
         dict(num_classes=10, img_size=64, embed_dim=(32, 48, 64), key_dim=8, num_heads=(2, 3, 4), depth=(1, 1, 1)), 64),
        # Rotary position embeddings on patches, SwiGLU.
        ("timm_eva02_tiny", "eva02_tiny_patch14_224",
         dict(num_classes=10, img_size=28, depth=2, embed_dim=48, num_heads=3), 28),
        # Relative position bias tables.
        ("timm_beit", "beit_base_patch16_224",
         dict(num_classes=10, img_size=32, patch_size=8, depth=2, embed_dim=48, num_heads=3), 32),
        # Train-time over-parameterised mobile blocks, large-kernel depthwise convolutions.
        ("timm_fastvit_t8", "fastvit_t8", dict(num_classes=10, layers=(1, 1, 1, 1), embed_dims=(16, 32, 64, 128)), 64),
        # ReLU linear attention (matmuls with padding, division by a sum).
        ("timm_efficientvit_b0", "efficientvit_b0",
         dict(num_classes=10, widths=(8, 16, 32, 64, 128), depths=(1, 1, 1, 1, 1), head_dim=16, head_widths=(256, 256)),
         64),
        # Cross-covariance attention (attention over channels, F.normalize), Fourier position encoding,
        # class-attention layers.
        ("timm_xcit", "xcit_nano_12_p8_224",
         dict(img_size=32, depth=2, embed_dim=32, num_heads=2, num_classes=10, eta=1.0), 32),
        # Bidirectional LSTMs over the rows and the columns of the patch grid.
        ("timm_sequencer", "sequencer2d_s",
         dict(img_size=32, layers=[1, 1, 1, 1], patch_sizes=[4, 2, 1, 1], embed_dims=[16, 32, 32, 32],
              hidden_sizes=[8, 16, 16, 16], num_classes=10), 32),
        # Space-to-depth stem, anti-aliased downsampling, leaky ReLU batch norm.
        ("timm_tresnet", "tresnet_m", dict(num_classes=10, layers=[1, 1, 1, 1], width_factor=0.25), 64),
        # Split depthwise-transposed attention (XCA) and positional encoding by Fourier features.
        ("timm_edgenext", "edgenext_xx_small", dict(num_classes=10, depths=(1, 1, 1, 1), dims=(16, 32, 48, 64)), 64),
        # Mask-unit attention: tokens unrolled and rerolled by chains of views and permutes.
        ("timm_hiera", "hiera_tiny_224",
         dict(img_size=64, embed_dim=16, num_heads=1, stages=(1, 1, 1, 1), num_classes=10), 64),
        # Hierarchical splits inside the bottleneck (split, add, cat).
        ("timm_res2net", "res2net50_14w_8s",
         dict(num_classes=10, layers=[1, 1, 1, 1], channels=(16, 32, 64, 128), stem_width=16), 64),
        # Selective kernels: a softmax over branches of different receptive fields.
        ("timm_skresnet", "skresnet18",
         dict(num_classes=10, layers=[1, 1, 1, 1], channels=(16, 32, 64, 128), stem_width=16), 64),
        # Spatial-reduction attention over strided keys, depthwise convolutions in the MLP.
        ("timm_pvt_v2", "pvt_v2_b0",
         dict(num_classes=10, depths=(1, 1, 1, 1), embed_dims=(16, 32, 48, 64), num_heads=(1, 2, 2, 2)), 64),
        # Locally-grouped and global sub-sampled attention, positional encoding by a convolution.
        ("timm_twins", "twins_pcpvt_small",
         dict(num_classes=10, depths=(1, 1, 1, 1), embed_dims=(16, 32, 48, 64), num_heads=(1, 2, 2, 2)), 64),
        # Dual attention: windows of tokens, then channel groups.
        ("timm_davit", "davit_tiny",
         dict(num_classes=10, depths=(1, 1, 1, 1), embed_dims=(16, 32, 48, 64), num_heads=(1, 2, 2, 2)), 64),
        # Pooling-based vision transformer: tokens pooled by depthwise convolutions between stages.
        ("timm_pit", "pit_ti_224",
         dict(num_classes=10, img_size=64, patch_size=8, stride=4, base_dims=[8, 8, 8], depth=[1, 1, 1],
              heads=[1, 2, 4]), 64),
        # Depthwise convolution split into square, band and identity branches.
        ("timm_inception_next", "inception_next_tiny", dict(num_classes=10, depths=(1, 1, 1, 1), dims=(16, 32, 48, 64)),
         64),
        # Gated CNN blocks (MambaOut: Mamba's block without the state-space model).
        ("timm_mambaout", "mambaout_femto", dict(num_classes=10, depths=(1, 1, 1, 1), dims=(16, 32, 48, 64)), 64),
        # The star operation: an elementwise product of two branches.
        ("timm_starnet", "starnet_s050", dict(num_classes=10), 64),
    ]
    models = [(name, "timm", ctor(arch, **kw), create(arch, **kw), images(size)) for name, arch, kw, size in specs]

    # Two whose registered builders fix the arguments to reduce: their classes, built directly.
    from timm.models.mlp_mixer import MlpMixer
    from timm.models.metaformer import MetaFormer, GroupNorm1
    from timm.models.convmixer import ConvMixer
    from timm.models.nfnet import NormFreeNet, NfCfg

    # Weight-standardised convolutions (batch_norm over each weight), no BatchNorm: nf_regnet_b0's
    # block kinds at a fraction of its widths.
    nf_cfg = dict(depths=(1, 1, 1, 1), channels=(16, 32, 48, 64), stem_chs=16, stem_type="deep_quad", group_size=8,
                  bottle_ratio=0.5, extra_conv=True, act_layer="silu", attn_layer="se", attn_kwargs=dict(rd_ratio=0.5))
    models.append(("timm_nf_regnet", "timm", f"timm.models.nfnet.NormFreeNet(NfCfg(**{nf_cfg!r}), num_classes=10)",
                   lambda: ZooWrapper(NormFreeNet(NfCfg(**nf_cfg), num_classes=10)), images(64)))

    models.append(("timm_convmixer", "timm",
                   "timm.models.convmixer.ConvMixer(dim=32, depth=2, kernel_size=5, patch_size=4, num_classes=10)",
                   lambda: ZooWrapper(ConvMixer(dim=32, depth=2, kernel_size=5, patch_size=4, num_classes=10)),
                   images(32)))

    models.insert(8, ("timm_mixer", "timm",
                      "timm.models.mlp_mixer.MlpMixer(img_size=32, patch_size=8, num_blocks=2, embed_dim=64, "
                      "num_classes=10)  # mixer_s16_224 reduced",
                      lambda: ZooWrapper(MlpMixer(img_size=32, patch_size=8, num_blocks=2, embed_dim=64, num_classes=10)),
                      images(32)))
    models.insert(10, ("timm_poolformer", "timm",
                       "timm.models.metaformer.MetaFormer(poolformer_s12's arguments, depths=(1,1,1,1), "
                       "dims=(16,32,48,64), layer_scale_init_values=0.1, num_classes=10)",
                       lambda: ZooWrapper(MetaFormer(depths=(1, 1, 1, 1), dims=(16, 32, 48, 64), downsample_norm=None,
                                                     mlp_act=nn.GELU, mlp_bias=True, norm_layers=GroupNorm1,
                                                     layer_scale_init_values=0.1, res_scale_init_values=None,
                                                     use_mlp_head=False, num_classes=10)),
                       images(64)))

    # Built from their classes: their registered builders fix the widths and depths to reduce.
    import dataclasses
    from timm.models.volo import VOLO
    from timm.models.mvitv2 import MultiScaleVit, MultiScaleVitCfg
    from timm.models.tiny_vit import TinyVit
    from timm.models.dla import DLA, DlaBasic
    from timm.models.maxxvit import MaxxVit, model_cfgs as maxxvit_cfgs

    coatnet_cfg = dataclasses.replace(maxxvit_cfgs["coatnet_nano_rw"], embed_dim=(32, 64, 96, 128), depths=(1, 1, 1, 1),
                                      stem_width=(16, 32))
    models += [
        # Outlook attention: nn.Unfold / nn.Fold (im2col, col2im) around a softmax.
        ("timm_volo", "timm", "timm.models.volo.VOLO(layers=[1,1,1,1], img_size=32, stem_hidden_dim=16, "
         "embed_dims=[32,64,64,64], num_heads=[1,2,2,2], num_classes=10)",
         lambda: ZooWrapper(VOLO(layers=[1, 1, 1, 1], img_size=32, num_classes=10, stem_hidden_dim=16,
                                 embed_dims=[32, 64, 64, 64], num_heads=[1, 2, 2, 2])), images(32)),
        # Pooling attention with decomposed relative positions.
        ("timm_mvitv2", "timm", "timm.models.mvitv2.MultiScaleVit(MultiScaleVitCfg(depths=(1,1,1,1), embed_dim=16, "
         "num_heads=1), img_size=(32,32), num_classes=10)",
         lambda: ZooWrapper(MultiScaleVit(MultiScaleVitCfg(depths=(1, 1, 1, 1), embed_dim=16, num_heads=1),
                                          img_size=(32, 32), num_classes=10)), images(32)),
        # Windowed attention with an attention-bias table, MBConv stages.
        ("timm_tinyvit", "timm", "timm.models.tiny_vit.TinyVit(depths=(1,1,1,1), embed_dims=(16,32,64,96), "
         "num_heads=(1,2,4,4), window_sizes=(2,2,2,2), num_classes=10)",
         lambda: ZooWrapper(TinyVit(num_classes=10, depths=(1, 1, 1, 1), embed_dims=(16, 32, 64, 96),
                                    num_heads=(1, 2, 4, 4), window_sizes=(2, 2, 2, 2), drop_path_rate=0.0)),
         images(64)),
        # Deep layer aggregation: trees of blocks joined by concatenating roots.
        ("timm_dla", "timm", "timm.models.dla.DLA(levels=(1,1,1,2,2,1), channels=(8,16,16,32,32,64), block=DlaBasic, "
         "num_classes=10)  # dla34's levels",
         lambda: ZooWrapper(DLA(levels=(1, 1, 1, 2, 2, 1), channels=(8, 16, 16, 32, 32, 64), block=DlaBasic,
                                num_classes=10)), images(64)),
        # MBConv stages, then transformer stages with relative position bias.
        ("timm_coatnet", "timm", "timm.models.maxxvit.MaxxVit(coatnet_nano_rw with embed_dim=(32,64,96,128), "
         "depths=(1,1,1,1), stem_width=(16,32)), img_size=64, num_classes=10)",
         lambda: ZooWrapper(MaxxVit(coatnet_cfg, img_size=64, num_classes=10)), images(64)),
    ]
    return models


def hf_models():
    import transformers as T

    T.logging.set_verbosity_error()

    def lm(model_cls, config_cls, call, after_train=None, **cfg):
        def make():
            config = config_cls(**cfg)
            return ZooWrapper(model_cls(config), call, after_train)
        return make

    def no_layerdrop(model):
        """LayerDrop draws `torch.rand([]) < layerdrop` in training mode, a data-dependent branch
        torch.export cannot trace (even at layerdrop 0). The `_no_layerdrop` variants put only the
        modules that draw it (BartEncoder, OPTDecoder, WhisperEncoder, ...: those with a
        `layerdrop` attribute; Wav2Vec2Encoder and WavLMEncoder, which read their config's) in eval mode; their
        children stay in training mode. With every dropout probability 0 that changes nothing
        else."""
        for mod in model.modules():
            if hasattr(mod, "layerdrop") or type(mod).__name__ in ("Wav2Vec2Encoder", "WavLMEncoder"):
                mod.training = False

    def ctor(model_cls, config_cls, **cfg):
        args = ", ".join(f"{k}={v!r}" for k, v in cfg.items())
        return f"transformers.{model_cls.__name__}({config_cls.__name__}({args}))"

    def ids_only(m, ids):
        return m(input_ids=ids, use_cache=False, return_dict=False)

    def ids_mask(m, ids, mask):
        return m(input_ids=ids, attention_mask=mask, return_dict=False)

    def seq2seq(m, ids, mask, dec):
        return m(input_ids=ids, attention_mask=mask, decoder_input_ids=dec, use_cache=False, return_dict=False)

    def pixels(m, x):
        return m(pixel_values=x, return_dict=False)

    def audio(m, x):
        return m(input_features=x, return_dict=False)

    def labels_are_ids(m, ids):
        return m(input_ids=ids, labels=ids, use_cache=False, return_dict=False)

    def waveform(m, x):
        return m(input_values=x, return_dict=False)

    def text_and_image(m, ids, mask, px):
        return m(input_ids=ids, attention_mask=mask, pixel_values=px, return_dict=False)[:2]

    small_decoder = dict(vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
                         attention_dropout=0.0, use_cache=False)
    bert_like = dict(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                     intermediate_size=64, max_position_embeddings=32, hidden_dropout_prob=0.0,
                     attention_probs_dropout_prob=0.0)
    specs = [
        ("hf_gpt2", T.GPT2LMHeadModel, T.GPT2Config, ids_only, tokens(),
         dict(vocab_size=VOCAB, n_positions=32, n_embd=32, n_layer=2, n_head=2, n_inner=64, resid_pdrop=0.0,
              embd_pdrop=0.0, attn_pdrop=0.0, summary_first_dropout=0.0, use_cache=False)),
        ("hf_bert_mlm", T.BertForMaskedLM, T.BertConfig, ids_mask, tokens(mask=True), dict(bert_like)),
        ("hf_roberta_cls", T.RobertaForSequenceClassification, T.RobertaConfig, ids_mask, tokens(mask=True),
         dict(bert_like, max_position_embeddings=40, pad_token_id=1, num_labels=3)),
        ("hf_distilbert_qa", T.DistilBertForQuestionAnswering, T.DistilBertConfig, ids_mask, tokens(mask=True),
         dict(vocab_size=VOCAB, dim=32, n_layers=2, n_heads=2, hidden_dim=64, max_position_embeddings=32,
              dropout=0.0, attention_dropout=0.0, qa_dropout=0.0, seq_classif_dropout=0.0)),
        ("hf_albert_mlm", T.AlbertForMaskedLM, T.AlbertConfig, ids_mask, tokens(mask=True),
         dict(bert_like, embedding_size=16, classifier_dropout_prob=0.0)),
        ("hf_electra_disc", T.ElectraForPreTraining, T.ElectraConfig, ids_mask, tokens(mask=True),
         dict(bert_like, embedding_size=16)),
        ("hf_deberta_v2", T.DebertaV2ForSequenceClassification, T.DebertaV2Config, ids_mask, tokens(mask=True),
         dict(bert_like, relative_attention=True, pos_att_type=["p2c", "c2p"], max_relative_positions=16,
              position_buckets=8, num_labels=3, pooler_dropout=0.0)),
        ("hf_llama", T.LlamaForCausalLM, T.LlamaConfig, ids_only, tokens(), dict(small_decoder)),
        ("hf_mistral", T.MistralForCausalLM, T.MistralConfig, ids_only, tokens(),
         dict(small_decoder, sliding_window=4)),
        ("hf_qwen2", T.Qwen2ForCausalLM, T.Qwen2Config, ids_only, tokens(), dict(small_decoder)),
        ("hf_gpt_neo", T.GPTNeoForCausalLM, T.GPTNeoConfig, ids_only, tokens(),
         dict(vocab_size=VOCAB, hidden_size=32, num_layers=2, attention_types=[[["global", "local"], 1]],
              num_heads=2, intermediate_size=64, window_size=4, max_position_embeddings=32, embed_dropout=0.0,
              attention_dropout=0.0, resid_dropout=0.0, use_cache=False)),
        ("hf_opt", T.OPTForCausalLM, T.OPTConfig, ids_only, tokens(),
         dict(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2, ffn_dim=64, num_attention_heads=2,
              max_position_embeddings=32, word_embed_proj_dim=32, dropout=0.0, attention_dropout=0.0,
              activation_dropout=0.0, layerdrop=0.0, use_cache=False)),
        ("hf_t5", T.T5ForConditionalGeneration, T.T5Config, seq2seq, tokens(mask=True, decoder=True),
         dict(vocab_size=VOCAB, d_model=32, d_kv=16, d_ff=64, num_layers=2, num_decoder_layers=2, num_heads=2,
              relative_attention_num_buckets=8, relative_attention_max_distance=16, dropout_rate=0.0,
              decoder_start_token_id=0, use_cache=False)),
        ("hf_bart", T.BartForConditionalGeneration, T.BartConfig, seq2seq, tokens(mask=True, decoder=True),
         dict(vocab_size=VOCAB, d_model=32, encoder_layers=1, decoder_layers=1, encoder_attention_heads=2,
              decoder_attention_heads=2, encoder_ffn_dim=64, decoder_ffn_dim=64, max_position_embeddings=32,
              dropout=0.0, attention_dropout=0.0, activation_dropout=0.0, classifier_dropout=0.0,
              encoder_layerdrop=0.0, decoder_layerdrop=0.0, use_cache=False)),
        ("hf_vit", T.ViTForImageClassification, T.ViTConfig, pixels, images(32),
         dict(image_size=32, patch_size=8, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
              intermediate_size=64, num_labels=10, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)),
        ("hf_whisper_audio_cls", T.WhisperForAudioClassification, T.WhisperConfig, audio,
         lambda: (torch.randn(BATCH, 16, 32, generator=gen(3)),),
         dict(vocab_size=VOCAB, num_mel_bins=16, encoder_layers=2, encoder_attention_heads=2, decoder_layers=1,
              decoder_attention_heads=2, d_model=32, encoder_ffn_dim=64, decoder_ffn_dim=64,
              max_source_positions=16, max_target_positions=16, dropout=0.0, attention_dropout=0.0,
              activation_dropout=0.0, encoder_layerdrop=0.0, decoder_layerdrop=0.0, num_labels=3,
              classifier_proj_size=16, use_cache=False)),
        # The loss inside the forward, as Trainer computes it: cross_entropy of shifted labels.
        ("hf_gpt2_labels", T.GPT2LMHeadModel, T.GPT2Config, labels_are_ids, tokens(),
         dict(vocab_size=VOCAB, n_positions=32, n_embd=32, n_layer=2, n_head=2, n_inner=64, resid_pdrop=0.0,
              embd_pdrop=0.0, attn_pdrop=0.0, use_cache=False)),
        ("hf_mobilebert", T.MobileBertForSequenceClassification, T.MobileBertConfig, ids_mask, tokens(mask=True),
         dict(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=32,
              embedding_size=16, intra_bottleneck_size=16, true_hidden_size=16, num_feedforward_networks=2,
              hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, classifier_dropout=0.0, num_labels=3)),
        ("hf_gemma", T.GemmaForCausalLM, T.GemmaConfig, ids_only, tokens(), dict(small_decoder, head_dim=8)),
        ("hf_phi", T.PhiForCausalLM, T.PhiConfig, ids_only, tokens(),
         dict(vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
              resid_pdrop=0.0, embd_pdrop=0.0, attention_dropout=0.0, partial_rotary_factor=0.5, use_cache=False)),
        ("hf_gptj", T.GPTJForCausalLM, T.GPTJConfig, ids_only, tokens(),
         dict(vocab_size=VOCAB, n_positions=32, n_embd=32, n_layer=2, n_head=4, rotary_dim=4, resid_pdrop=0.0,
              embd_pdrop=0.0, attn_pdrop=0.0, use_cache=False)),
        # ALiBi position biases (baddbmm).
        ("hf_bloom", T.BloomForCausalLM, T.BloomConfig, ids_only, tokens(),
         dict(vocab_size=VOCAB, hidden_size=32, n_layer=2, n_head=4, hidden_dropout=0.0, attention_dropout=0.0,
              use_cache=False)),
        # A selective state-space model: its scan is a Python loop over the sequence (no CUDA kernels
        # on the CPU), written out step by step.
        ("hf_mamba", T.MambaForCausalLM, T.MambaConfig, ids_only, tokens(),
         dict(vocab_size=VOCAB, hidden_size=32, state_size=8, num_hidden_layers=2, expand=2, conv_kernel=4,
              use_cache=False)),
        # Two towers and two inputs of different kinds; logit_scale's exp.
        ("hf_clip", T.CLIPModel, T.CLIPConfig, text_and_image, lambda: tokens(mask=True)() + images(32)(),
         dict(text_config=dict(vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                               num_attention_heads=2, max_position_embeddings=16),
              vision_config=dict(hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2,
                                 image_size=32, patch_size=8),
              projection_dim=16)),
        ("hf_falcon", T.FalconForCausalLM, T.FalconConfig, ids_only, tokens(),
         dict(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
              new_decoder_architecture=True, num_kv_heads=2, hidden_dropout=0.0, attention_dropout=0.0,
              use_cache=False)),
        ("hf_stablelm", T.StableLmForCausalLM, T.StableLmConfig, ids_only, tokens(),
         dict(small_decoder, qk_layernorm=True, partial_rotary_factor=0.5)),
        ("hf_gpt_neox", T.GPTNeoXForCausalLM, T.GPTNeoXConfig, ids_only, tokens(),
         dict(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
              rotary_pct=0.5, hidden_dropout=0.0, attention_dropout=0.0, use_cache=False)),
        # Rotary embeddings and token dropout's rescaling by the share of mask tokens.
        ("hf_esm", T.EsmForMaskedLM, T.EsmConfig, ids_mask, tokens(mask=True),
         dict(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
              position_embedding_type="rotary", hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
              mask_token_id=2, pad_token_id=1, token_dropout=True, max_position_embeddings=32)),
        # Two-stream relative attention (einsum).
        ("hf_xlnet", T.XLNetLMHeadModel, T.XLNetConfig,
         lambda m, ids: m(input_ids=ids, use_mems=False, return_dict=False), tokens(),
         dict(vocab_size=VOCAB, d_model=32, n_layer=2, n_head=2, d_inner=64, dropout=0.0, use_mems_train=False)),
        # Cross-attention into a latent array.
        ("hf_perceiver", T.PerceiverForMaskedLM, T.PerceiverConfig,
         lambda m, ids, mask: m(inputs=ids, attention_mask=mask, return_dict=False), tokens(mask=True),
         dict(num_latents=8, d_latents=32, d_model=32, num_blocks=1, num_self_attends_per_block=1,
              num_self_attention_heads=2, num_cross_attention_heads=1, qk_channels=16, v_channels=32,
              vocab_size=VOCAB, max_position_embeddings=SEQ, attention_probs_dropout_prob=0.0)),
        # Position embeddings interpolated bicubically to the image; layer scale.
        ("hf_dinov2", T.Dinov2Model, T.Dinov2Config, pixels, images(32),
         dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, image_size=32, patch_size=8, mlp_ratio=2,
              layerscale_value=0.5, drop_path_rate=0.0, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)),
        # Attention over spatially reduced keys, an all-MLP decoder upsampling bilinearly.
        ("hf_segformer", T.SegformerForSemanticSegmentation, T.SegformerConfig, pixels, images(64),
         dict(num_encoder_blocks=2, depths=[1, 1], sr_ratios=[2, 1], hidden_sizes=[16, 32], patch_sizes=[7, 3],
              strides=[4, 2], num_attention_heads=[1, 2], mlp_ratios=[2, 2], decoder_hidden_size=32, num_labels=3,
              hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, classifier_dropout_prob=0.0,
              drop_path_rate=0.0)),
        # Global response normalisation (a norm over the spatial dimensions).
        ("hf_convnextv2", T.ConvNextV2ForImageClassification, T.ConvNextV2Config, pixels, images(64),
         dict(hidden_sizes=[16, 32], depths=[1, 1], num_stages=2, num_labels=10, drop_path_rate=0.0)),
        # Cosine attention with a clamped learned scale; position bias from an MLP over log coordinates.
        ("hf_swinv2", T.Swinv2ForImageClassification, T.Swinv2Config, pixels, images(32),
         dict(image_size=32, patch_size=4, embed_dim=16, depths=[2, 2], num_heads=[2, 4], window_size=4,
              num_labels=10, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, drop_path_rate=0.0)),
        # Video: tubelets by a Conv3d, fixed sinusoidal positions.
        ("hf_videomae", T.VideoMAEForVideoClassification, T.VideoMAEConfig, pixels,
         lambda: (torch.randn(BATCH, 4, 3, 16, 16, generator=gen(1)),),
         dict(image_size=16, patch_size=8, num_frames=4, tubelet_size=2, hidden_size=32, num_hidden_layers=2,
              num_attention_heads=2, intermediate_size=64, num_labels=3, hidden_dropout_prob=0.0,
              attention_probs_dropout_prob=0.0)),
        # Raw audio: strided Conv1d feature extractor with GroupNorm, a weight-normed grouped
        # positional convolution.
        ("hf_wav2vec2", T.Wav2Vec2ForCTC, T.Wav2Vec2Config, waveform,
         lambda: (torch.randn(BATCH, 400, generator=gen(4)),),
         dict(vocab_size=12, hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
              conv_dim=(16, 16), conv_stride=(5, 2), conv_kernel=(10, 3), num_conv_pos_embeddings=8,
              num_conv_pos_embedding_groups=4, hidden_dropout=0.0, activation_dropout=0.0, attention_dropout=0.0,
              feat_proj_dropout=0.0, final_dropout=0.0, layerdrop=0.0, mask_time_prob=0.0)),
        # Mixtures of experts: top-2 routing; each expert's tokens found by torch.where (nonzero: a
        # size read from the data, an unbacked symbol) and summed back with index_add_.
        ("hf_mixtral", T.MixtralForCausalLM, T.MixtralConfig, ids_only, tokens(),
         dict(small_decoder, num_local_experts=4, num_experts_per_tok=2, router_jitter_noise=0.0)),
        ("hf_olmoe", T.OlmoeForCausalLM, T.OlmoeConfig, ids_only, tokens(),
         dict(small_decoder, num_experts=4, num_experts_per_tok=2)),
        # Fourier mixing in place of attention: fftn over the sequence and hidden dimensions, its
        # real part (complex tensors inside the step).
        ("hf_fnet", T.FNetForMaskedLM, T.FNetConfig, lambda m, ids: m(input_ids=ids, return_dict=False), tokens(),
         dict(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2, intermediate_size=64, max_position_embeddings=32,
              hidden_dropout_prob=0.0, use_tpu_fourier_optimizations=False)),
        # Span-based dynamic convolution: kernels computed per token, applied through nn.Unfold.
        ("hf_convbert", T.ConvBertForMaskedLM, T.ConvBertConfig, ids_mask, tokens(mask=True),
         dict(bert_like, embedding_size=32, head_ratio=2, conv_kernel_size=3, num_groups=1)),
        # Grouped 1x1 convolutions in place of the linear layers.
        ("hf_squeezebert", T.SqueezeBertForMaskedLM, T.SqueezeBertConfig, ids_mask, tokens(mask=True),
         dict(bert_like, embedding_size=32, q_groups=2, k_groups=2, v_groups=2, post_attention_groups=2,
              intermediate_groups=4, output_groups=4)),
        # Nystrom attention: landmark means and an iterative Moore-Penrose pseudo-inverse.
        ("hf_nystromformer", T.NystromformerForMaskedLM, T.NystromformerConfig, ids_mask, tokens(mask=True),
         dict(bert_like, num_landmarks=4, segment_means_seq_len=SEQ, conv_kernel_size=3, inv_coeff_init_option=False,
              max_position_embeddings=40)),
        # Mamba-2's chunked state-space scan (segment sums, cumsum, exp of masked differences).
        ("hf_mamba2", T.Mamba2ForCausalLM, T.Mamba2Config, ids_only, tokens(),
         dict(vocab_size=VOCAB, hidden_size=32, state_size=8, num_hidden_layers=2, expand=2, conv_kernel=4,
              num_heads=4, head_dim=16, n_groups=1, chunk_size=4, use_cache=False)),
        # Dense prediction: ViT features reassembled at four scales, fused, upsampled.
        ("hf_dpt", T.DPTForDepthEstimation, T.DPTConfig, pixels, images(32),
         dict(image_size=32, patch_size=8, hidden_size=32, num_hidden_layers=4, num_attention_heads=2,
              intermediate_size=64, backbone_out_indices=[0, 1, 2, 3], neck_hidden_sizes=[8, 16, 32, 32],
              fusion_hidden_size=16, head_in_index=-1, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)),
        # Characters: hashed embeddings, a strided downsampling convolution and upsampling by repeat.
        ("hf_canine", T.CanineModel, T.CanineConfig, ids_mask, tokens(mask=True, seq=16),
         dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
              hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, downsampling_rate=4, num_hash_functions=4,
              num_hash_buckets=64, local_transformer_stride=4, max_position_embeddings=64)),
        # RWKV's time mixing: a recurrence over the sequence with exponentials kept stable by a running max.
        ("hf_rwkv", T.RwkvForCausalLM, T.RwkvConfig, ids_only, tokens(),
         dict(vocab_size=VOCAB, context_length=32, hidden_size=32, num_hidden_layers=2, attention_hidden_size=32,
              intermediate_size=64, use_cache=False)),
        # Time series: instance normalisation by mean and std, patches by unfold, a flatten head.
        ("hf_patchtst", T.PatchTSTForPrediction, T.PatchTSTConfig, lambda m, x: m(past_values=x, return_dict=False),
         lambda: (torch.randn(BATCH, 32, 3, generator=gen(6)),),
         dict(num_input_channels=3, context_length=32, patch_length=8, patch_stride=4, prediction_length=8,
              d_model=32, num_attention_heads=2, num_hidden_layers=2, ffn_dim=64, dropout=0.0, attention_dropout=0.0,
              ff_dropout=0.0, positional_dropout=0.0, path_dropout=0.0, head_dropout=0.0)),
        # Speech: a strided Conv1d subsampler with GLU, sinusoidal positions, an encoder-decoder.
        ("hf_speech2text", T.Speech2TextForConditionalGeneration, T.Speech2TextConfig,
         lambda m, x, dec: m(input_features=x, decoder_input_ids=dec, use_cache=False, return_dict=False),
         lambda: (torch.randn(BATCH, 16, 8, generator=gen(3)), tokens()()[0]),
         dict(vocab_size=VOCAB, d_model=32, encoder_layers=1, decoder_layers=1, encoder_attention_heads=2,
              decoder_attention_heads=2, encoder_ffn_dim=64, decoder_ffn_dim=64, max_source_positions=32,
              max_target_positions=32, num_conv_layers=2, conv_channels=16, input_feat_per_channel=8,
              input_channels=1, dropout=0.0, attention_dropout=0.0, activation_dropout=0.0,
              encoder_layerdrop=0.0, decoder_layerdrop=0.0, use_cache=False)),
        # Translation: frozen sinusoidal position tables (parameters that require no grad).
        ("hf_marian", T.MarianMTModel, T.MarianConfig, seq2seq, tokens(mask=True, decoder=True),
         dict(vocab_size=VOCAB, d_model=32, encoder_layers=1, decoder_layers=1, encoder_attention_heads=2,
              decoder_attention_heads=2, encoder_ffn_dim=64, decoder_ffn_dim=64, max_position_embeddings=32,
              dropout=0.0, attention_dropout=0.0, activation_dropout=0.0, encoder_layerdrop=0.0,
              decoder_layerdrop=0.0, pad_token_id=VOCAB - 1, decoder_start_token_id=VOCAB - 1, use_cache=False)),
        # Gated relative position bias over log-spaced buckets.
        ("hf_wavlm", T.WavLMForCTC, T.WavLMConfig, waveform, lambda: (torch.randn(BATCH, 400, generator=gen(4)),),
         dict(vocab_size=12, hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
              conv_dim=(16, 16), conv_stride=(5, 2), conv_kernel=(10, 3), num_conv_pos_embeddings=8,
              num_conv_pos_embedding_groups=4, hidden_dropout=0.0, activation_dropout=0.0, attention_dropout=0.0,
              feat_proj_dropout=0.0, final_dropout=0.0, layerdrop=0.0, mask_time_prob=0.0, num_buckets=16,
              max_bucket_distance=32)),
        # Transient-global attention: local blocks plus per-block summaries (one_hot of block ids).
        ("hf_longt5", T.LongT5ForConditionalGeneration, T.LongT5Config, seq2seq, tokens(mask=True, decoder=True),
         dict(vocab_size=VOCAB, d_model=32, d_kv=16, d_ff=64, num_layers=1, num_decoder_layers=1, num_heads=2,
              local_radius=2, global_block_size=4, encoder_attention_type="transient-global",
              relative_attention_num_buckets=8, relative_attention_max_distance=16, dropout_rate=0.0,
              decoder_start_token_id=0, use_cache=False)),
        # Masked autoencoder pre-training: patches shuffled by argsort of a noise input, gathered,
        # unshuffled, the loss on the masked ones.
        ("hf_vitmae", T.ViTMAEForPreTraining, T.ViTMAEConfig,
         lambda m, x, noise: (lambda o: (o.loss, o.logits, o.mask))(m(pixel_values=x, noise=noise)),
         lambda: (torch.randn(BATCH, 3, 32, 32, generator=gen(1)), torch.rand(BATCH, 16, generator=gen(8))),
         dict(image_size=32, patch_size=8, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
              intermediate_size=64, decoder_hidden_size=16, decoder_num_hidden_layers=1, decoder_num_attention_heads=2,
              decoder_intermediate_size=32, mask_ratio=0.5, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)),
        # Super-resolution: Swin V2 blocks, an upsampler by pixel shuffle.
        ("hf_swin2sr", T.Swin2SRForImageSuperResolution, T.Swin2SRConfig, pixels, images(16),
         dict(image_size=16, patch_size=1, embed_dim=16, depths=[1, 1], num_heads=[2, 2], window_size=4, upscale=2,
              upsampler="pixelshuffle", hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
              drop_path_rate=0.0)),
        # Detection tokens appended to a ViT's patches; box regression through a sigmoid.
        ("hf_yolos", T.YolosForObjectDetection, T.YolosConfig, pixels, images(32),
         dict(image_size=[32, 32], patch_size=8, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
              intermediate_size=64, num_detection_tokens=4, num_labels=3, hidden_dropout_prob=0.0,
              attention_probs_dropout_prob=0.0)),
        # Separable linear attention over patches unfolded and folded back.
        ("hf_mobilevitv2", T.MobileViTV2ForImageClassification, T.MobileViTV2Config, pixels, images(64),
         dict(image_size=64, width_multiplier=0.25, num_labels=10, attn_dropout=0.0, ffn_dropout=0.0, dropout=0.0,
              classifier_dropout_prob=0.0)),
        # Document layout: embeddings of each token's box coordinates, widths and heights.
        ("hf_layoutlm", T.LayoutLMForMaskedLM, T.LayoutLMConfig,
         lambda m, ids, mask, bbox: m(input_ids=ids, attention_mask=mask, bbox=bbox, return_dict=False),
         lambda: tokens(mask=True)() + (torch.sort(torch.randint(0, 100, (BATCH, SEQ, 4), generator=gen(9)), -1).values,),
         dict(bert_like, max_2d_position_embeddings=128)),
        # Reinforcement learning: returns, states and actions embedded and interleaved into one sequence.
        ("hf_decision_transformer", T.DecisionTransformerModel, T.DecisionTransformerConfig,
         lambda m, s, a, r, t, mask: m(states=s, actions=a, returns_to_go=r, timesteps=t, attention_mask=mask,
                                       return_dict=False),
         lambda: (torch.randn(BATCH, 4, 5, generator=gen(10)), torch.randn(BATCH, 4, 3, generator=gen(11)),
                  torch.randn(BATCH, 4, 1, generator=gen(12)), torch.arange(4).repeat(BATCH, 1),
                  torch.ones(BATCH, 4, dtype=torch.long)),
         dict(state_dim=5, act_dim=3, hidden_size=32, max_ep_len=16, n_layer=2, n_head=2, n_inner=64, n_positions=32,
              resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, use_cache=False)),
        # Multi-query attention: one key/value head shared by every query head.
        ("hf_gpt_bigcode", T.GPTBigCodeForCausalLM, T.GPTBigCodeConfig, ids_only, tokens(),
         dict(vocab_size=VOCAB, n_positions=32, n_embd=32, n_layer=2, n_head=4, n_inner=64, multi_query=True,
              resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, use_cache=False)),
        # Parallel attention and MLP after one bias-free layer norm, interleaved rotary, a logit scale.
        ("hf_cohere", T.CohereForCausalLM, T.CohereConfig, ids_only, tokens(), dict(small_decoder, logit_scale=0.5)),
        # Relative position buckets shared by every layer, on a BERT encoder.
        ("hf_mpnet", T.MPNetForMaskedLM, T.MPNetConfig, ids_mask, tokens(mask=True),
         dict(bert_like, max_position_embeddings=40)),
        # Time series: MLP-mixing across patches, features and channels, gated attention.
        ("hf_patchtsmixer", T.PatchTSMixerForPrediction, T.PatchTSMixerConfig,
         lambda m, x: m(past_values=x, return_dict=False), lambda: (torch.randn(BATCH, 32, 3, generator=gen(6)),),
         dict(context_length=32, patch_length=8, patch_stride=8, num_input_channels=3, prediction_length=8, d_model=16,
              num_layers=2, dropout=0.0, head_dropout=0.0, gated_attn=True, self_attn=True, self_attn_heads=2)),
    ]
    models = [(name, "transformers", ctor(model_cls, config_cls, **cfg), lm(model_cls, config_cls, call, **cfg),
               inputs) for name, model_cls, config_cls, call, inputs, cfg in specs]
    for name, model_cls, config_cls, call, inputs, cfg in specs:
        if name in ("hf_opt", "hf_bart", "hf_whisper_audio_cls", "hf_wav2vec2", "hf_speech2text", "hf_marian",
                    "hf_wavlm"):
            models.append((name + "_no_layerdrop", "transformers",
                           ctor(model_cls, config_cls, **cfg) + " with the LayerDrop modules' training=False",
                           lm(model_cls, config_cls, call, after_train=no_layerdrop, **cfg), inputs))
    return models


def all_models():
    return torch_nn_models() + torchvision_models() + timm_models() + hf_models()


# ----------------------------------------------------------------------------------------------
# Eager reference and export
# ----------------------------------------------------------------------------------------------


def seeds_for(outputs):
    g = gen(11)
    return [torch.randn(o.shape, generator=g, dtype=torch.float32) if o.is_floating_point()
            else torch.empty(0) for o in outputs]


def train_step(model, inputs, grad_outputs, buffer_names):
    """One training step of `model` (already in train mode): outputs, grads, buffers.
    grad_outputs: the seeds, or a function of the outputs that makes them."""
    outs = as_list(model(*inputs))
    if callable(grad_outputs):
        grad_outputs = grad_outputs(outs)
    diff = [(o, g) for o, g in zip(outs, grad_outputs) if o.requires_grad and g.numel() == o.numel() and g.numel()]
    if not diff:
        raise RuntimeError("no output requires grad in a training step")
    torch.autograd.backward([o for o, _ in diff], [g.to(o.dtype) for o, g in diff])
    grads, no_grad = {}, []
    for name, p in model.named_parameters(remove_duplicate=False):
        if p.grad is None:
            no_grad.append(name)
        else:
            grads[name] = p.grad.detach().clone()
    buffers = {n: b.detach().clone() for n, b in model.named_buffers(remove_duplicate=False) if n in buffer_names}
    return [o.detach().clone() for o in outs], grad_outputs, grads, no_grad, buffers


def eval_forward(model, inputs):
    with torch.no_grad():
        return [o.detach().clone() for o in as_list(model(*inputs))]


def median_ms(fn, runs=5):
    fn()  # warm-up
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t) * 1e3)
    return round(statistics.median(times), 3)


def timings(initial, inputs, grad_outputs):
    model = copy.deepcopy(initial).train()

    def step():
        outs = as_list(model(*clone_inputs(inputs)))
        diff = [(o, g) for o, g in zip(outs, grad_outputs) if o.requires_grad and g.numel() == o.numel() and g.numel()]
        torch.autograd.backward([o for o, _ in diff], [g for _, g in diff])
        model.zero_grad(set_to_none=True)

    train_ms = median_ms(step)
    em = copy.deepcopy(initial).eval()

    def infer():
        with torch.no_grad():
            em(*clone_inputs(inputs))

    return train_ms, median_ms(infer)


def export_and_save(model, inputs, path):
    ep = torch.export.export(model, tuple(clone_inputs(inputs)))
    torch.export.save(ep, path)
    return ep


def max_abs_diff(a_list, b_list):
    worst = 0.0
    for a, b in zip(a_list, b_list):
        if a.is_floating_point():
            worst = max(worst, (a.double() - b.double()).abs().max().item() if a.numel() else 0.0)
        elif not torch.equal(a, b):
            worst = float("inf")
    return worst


def run_model(name, library, constructor, make_model, make_inputs, out_dir):
    entry = {"name": name, "library": library, "constructor": constructor}
    seed = zlib.crc32(name.encode()) & 0x7FFFFFFF
    torch.manual_seed(seed)
    initial = zero_dropout(make_model()).train()
    reinit = reinit_all_zero_weights(initial, seed)
    if reinit:
        entry["reinit_zero"] = reinit
    inputs = list(make_inputs())
    entry["input_shapes"] = [[list(x.shape), str(x.dtype).replace("torch.", "")] for x in inputs]
    entry["num_params"] = len(list(initial.parameters()))  # tensors: a tied one counts once
    entry["num_param_names"] = len(list(initial.named_parameters(remove_duplicate=False)))
    entry["num_param_values"] = sum(p.numel() for p in initial.parameters())
    entry["tied"] = tied_pairs(initial)
    paths = {k: os.path.join(out_dir, f"{name}.{k}") for k in ("train.pt2", "eval.pt2", "expected.pt")}
    for p in paths.values():
        if os.path.exists(p):
            os.remove(p)

    # Export (train, then eval), each from a fresh copy of the initial weights.
    t0 = time.perf_counter()
    try:
        ep_train = export_and_save(copy.deepcopy(initial).train(), inputs, paths["train.pt2"])
        ep_eval = export_and_save(copy.deepcopy(initial).eval(), inputs, paths["eval.pt2"])
    except Exception as e:  # noqa: BLE001 - any failure of torch.export / torch.export.save
        for p in paths.values():
            if os.path.exists(p):
                os.remove(p)
        entry.update(status="export_failed", error=first_lines(e),
                     export_seconds=round(time.perf_counter() - t0, 2))
        entry["traceback_tail"] = traceback.format_exc().strip().splitlines()[-6:]
        return entry
    entry["export_seconds"] = round(time.perf_counter() - t0, 2)
    rnd = random_ops(ep_train) + random_ops(ep_eval)
    if rnd:  # a dropout this script failed to turn off: its eager answer would be one random draw
        raise AssertionError(f"{name}: random ops in the export: {rnd}")
    entry["train_ops"] = call_function_count(ep_train)
    unbacked = sorted(set(data_dependent_symbols(ep_train)) | set(data_dependent_symbols(ep_eval)))
    if unbacked:
        entry["data_dependent"] = unbacked
    entry["eval_ops"] = call_function_count(ep_eval)
    hops = {"train": higher_order_ops(paths["train.pt2"]), "eval": higher_order_ops(paths["eval.pt2"])}
    entry["higher_order_ops"] = {k: v for k, v in hops.items() if v}

    # The export's state is the initial state (export must not have run the model for real).
    init_state = dict(initial.named_parameters(remove_duplicate=False))
    init_state.update(initial.named_buffers(remove_duplicate=False))
    for key, value in ep_train.state_dict.items():
        if key in init_state and not torch.equal(value, init_state[key]):
            raise AssertionError(f"{name}: the train export's {key} differs from the initial model's")

    specs = ep_train.graph_signature.input_specs
    param_targets = {s.target for s in specs if s.kind.name == "PARAMETER"}
    buffer_targets = {s.target for s in specs if s.kind.name == "BUFFER"}
    param_names = [n for n, _ in initial.named_parameters(remove_duplicate=False)]
    missing = [n for n in param_names if n not in param_targets]
    assert not missing, f"{name}: parameters the export does not list: {missing}"

    # fp32 reference: one training step, then the eval forward, on copies of the initial model.
    outs, grad_outputs, grads, no_grad, buffers = train_step(
        copy.deepcopy(initial).train(), clone_inputs(inputs), seeds_for, buffer_targets)
    eval_outs = eval_forward(copy.deepcopy(initial).eval(), clone_inputs(inputs))
    expected = {"inputs": clone_inputs(inputs), "train_outputs": outs, "grad_outputs": grad_outputs,
                "grads": grads, "no_grad": no_grad, "buffers": buffers, "eval_outputs": eval_outs}

    # PyTorch's own run of the exported programs (a check of this script, reported only).
    try:
        check_train = eval_forward(ep_train.module(), clone_inputs(inputs))
        check_eval = eval_forward(ep_eval.module(), clone_inputs(inputs))
        entry["export_check_max_abs_diff"] = {"train": max_abs_diff(outs, check_train),
                                              "eval": max_abs_diff(eval_outs, check_eval)}
    except Exception as e:  # noqa: BLE001
        entry["export_check_error"] = first_lines(e)
    # Whether PyTorch itself can differentiate the exported program: torch.export traces through
    # a custom autograd.Function and keeps its forward only (DeBERTa's XSoftmax, whose forward
    # writes its saved output in place), and ep.module()'s backward then fails as aot_module's
    # does. The zoo test expects aotpipe to refuse such a step with the same autograd error.
    try:
        module_outs = as_list(ep_train.module()(*clone_inputs(inputs)))
        pairs = [(o, g) for o, g in zip(module_outs, grad_outputs) if o.requires_grad and g.numel() == o.numel()]
        torch.autograd.backward([o for o, _ in pairs], [g for _, g in pairs])
    except Exception as e:  # noqa: BLE001
        entry["export_backward_error"] = first_lines(e, n=1)

    status = "ok"
    try:
        m64 = copy.deepcopy(initial).double().train()
        g64 = [g.double() for g in grad_outputs]
        outs64, _, grads64, _, buffers64 = train_step(m64, to64(inputs), g64, buffer_targets)
        eval64 = eval_forward(copy.deepcopy(initial).double().eval(), to64(inputs))
        expected.update(train_outputs64=outs64, grads64=grads64, buffers64=buffers64, eval_outputs64=eval64)
    except Exception as e:  # noqa: BLE001
        status = "fp64_failed"
        entry["error"] = "float64 run: " + first_lines(e)
    expected["training"] = 1
    torch.save(expected, paths["expected.pt"])
    entry["status"] = status
    entry["eager_train_ms"], entry["eager_eval_ms"] = timings(initial, inputs, grad_outputs)
    return entry


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", help="output directory (required unless --list)")
    ap.add_argument("--only", help="comma-separated model names")
    ap.add_argument("--list", action="store_true", help="print the model names and exit")
    opts = ap.parse_args()
    models = all_models()
    names = [m[0] for m in models]
    assert len(names) == len(set(names)), "duplicate model names"
    if opts.list:
        print("\n".join(names))
        return 0
    if not opts.out:
        ap.error("--out is required")
    if opts.only:
        wanted = [n.strip() for n in opts.only.split(",") if n.strip()]
        unknown = [n for n in wanted if n not in names]
        if unknown:
            ap.error(f"unknown model(s): {', '.join(unknown)}")
        models = [m for m in models if m[0] in wanted]
    os.makedirs(opts.out, exist_ok=True)

    import importlib.metadata as md

    manifest = {"torch": torch.__version__}
    for pkg in ("torchvision", "timm", "transformers"):
        manifest[pkg] = md.version(pkg)
    manifest["models"] = []
    start = time.perf_counter()
    for name, library, constructor, make_model, make_inputs in models:
        t = time.perf_counter()
        try:
            entry = run_model(name, library, constructor, make_model, make_inputs, opts.out)
        except Exception as e:  # noqa: BLE001 - a bug here or an eager failure: say so, go on
            entry = {"name": name, "library": library, "constructor": constructor, "status": "export_failed",
                     "error": "before/after export: " + first_lines(e),
                     "traceback_tail": traceback.format_exc().strip().splitlines()[-6:]}
            for k in ("train.pt2", "eval.pt2", "expected.pt"):
                p = os.path.join(opts.out, f"{name}.{k}")
                if os.path.exists(p):
                    os.remove(p)
        entry["seconds"] = round(time.perf_counter() - t, 2)
        manifest["models"].append(entry)
        err = f"  {entry['error'].splitlines()[0]}" if entry.get("error") else ""
        print(f"{name:28s} {entry['status']:14s} {entry['seconds']:7.2f}s{err}", flush=True)
    total = time.perf_counter() - start
    manifest["total_seconds"] = round(total, 1)
    with open(os.path.join(opts.out, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1)
    ok = sum(1 for m in manifest["models"] if m["status"] != "export_failed")
    print(f"{ok}/{len(manifest['models'])} models exported in {total:.1f}s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
