"""Exports the example models of examples/pt2/ with torch.export and records eager PyTorch's answers.

For every model this writes, next to this script:
  <name>.pt2            torch.export.save of torch.export.export(model, args): the training IR
  <name>.aten.pt2       the same program after ep.run_decompositions(): the core-ATen IR (all
                        but no_grad_region)
  <name>.expected.pt    torch.save of what eager PyTorch computes on the sample inputs, one
                        training (or inference) step of the original nn.Module:
                          "inputs"        the user inputs (also the archive's sample inputs)
                          "outputs"       the user outputs
                          "grad_outputs"  the gradients fed to backward (training models)
                          "grads"         {parameter FQN: .grad after backward}
                          "buffers"       {buffer FQN: value after the step}
                          "training"      1 for a training step, 0 for inference

Models with data-dependent sizes (moe_routing) are written to tests/export/data_dependent/
instead: they run as exported but do not compile, and examples/ is what a batch compiles.

The C++ tests (tests/export/) load each archive, run it eagerly and compiled, and compare with
these files. Models are small (real architectures, small widths) so the archives stay small.

Usage: $AOTPIPE_PYTHON examples/pt2/export_models.py [--out DIR] [--data-dependent-out DIR] [--only NAME]
The output depends on the torch version (2.11.0); archives are byte-different on every run
(torch.export writes a random serialization id) but equal in content.
"""
import argparse
import copy
import math
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F


class BasicBlock(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.down = None
        if stride != 1 or cin != cout:
            self.down = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        idt = x if self.down is None else self.down(x)
        y = F.relu(self.bn1(self.conv1(x)))
        y = self.bn2(self.conv2(y))
        return F.relu(y + idt)


class ResNetTrain(nn.Module):
    """A ResNet (stem, two basic blocks, pooling, classifier) with BatchNorm in training mode."""

    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 8, 3, 1, 1, bias=False), nn.BatchNorm2d(8), nn.ReLU(inplace=True))
        self.layer1 = BasicBlock(8, 8, 1)
        self.layer2 = BasicBlock(8, 16, 2)
        self.fc = nn.Linear(16, 10)

    def forward(self, x):
        y = self.layer2(self.layer1(self.stem(x)))
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(y, 1), 1))


class GptBlockLoss(nn.Module):
    """Token embedding, a pre-LN GPT block with causal SDPA, LM head and cross-entropy loss."""

    def __init__(self, vocab=32, dim=16, heads=2, ctx=8):
        super().__init__()
        self.heads = heads
        self.tok = nn.Embedding(vocab, dim)
        self.pos = nn.Parameter(torch.randn(ctx, dim) * 0.02)
        self.ln1 = nn.LayerNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.ln2 = nn.LayerNorm(dim)
        self.fc1 = nn.Linear(dim, 4 * dim)
        self.fc2 = nn.Linear(4 * dim, dim)
        self.lnf = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, vocab, bias=False)

    def forward(self, idx, targets):
        b, t = idx.shape
        x = self.tok(idx) + self.pos[:t]
        q, k, v = self.qkv(self.ln1(x)).split(x.shape[-1], dim=-1)
        q, k, v = (z.view(b, t, self.heads, -1).transpose(1, 2) for z in (q, k, v))
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(a.transpose(1, 2).reshape(b, t, -1))
        x = x + self.fc2(F.gelu(self.fc1(self.ln2(x)), approximate="tanh"))
        logits = self.head(self.lnf(x))
        loss = F.cross_entropy(logits.view(-1, logits.shape[-1]), targets.view(-1))
        return loss, logits


class LstmTagger(nn.Module):
    """Embedding, a one-layer LSTM (batch_first) and a per-token classifier with log_softmax."""

    def __init__(self, vocab=20, emb=8, hidden=12, tags=5):
        super().__init__()
        self.emb = nn.Embedding(vocab, emb)
        self.lstm = nn.LSTM(emb, hidden, batch_first=True)
        self.out = nn.Linear(hidden, tags)

    def forward(self, tokens):
        h, _ = self.lstm(self.emb(tokens))
        return F.log_softmax(self.out(h), dim=-1)


class UNetUpBlock(nn.Module):
    """A U-Net decoder block: ConvTranspose2d upsampling, a skip connection resized with
    interpolate, concatenation, Conv2d, GroupNorm and SiLU."""

    def __init__(self, cin=16, cskip=8, cout=8):
        super().__init__()
        self.up = nn.ConvTranspose2d(cin, cout, 2, stride=2)
        self.conv = nn.Conv2d(cout + cskip, cout, 3, padding=1)
        self.norm = nn.GroupNorm(4, cout)

    def forward(self, x, skip):
        y = self.up(x)
        s = F.interpolate(skip, size=y.shape[-2:], mode="bilinear", align_corners=False)
        z = F.interpolate(y, scale_factor=1.0, mode="nearest")
        return F.silu(self.norm(self.conv(torch.cat([z, s], dim=1))))


class BufferMutationConst(nn.Module):
    """Mutates buffers in forward (a step counter, an exponential moving average), reads a
    non-persistent buffer and a constant tensor attribute (a lifted CONSTANT_TENSOR)."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(6, 6)
        self.register_buffer("steps", torch.zeros((), dtype=torch.int64))
        self.register_buffer("ema", torch.zeros(6))
        self.register_buffer("mask", (torch.arange(6) % 2).float(), persistent=False)
        self.scale = torch.tensor([0.5, 1.0, 1.5, 2.0, 2.5, 3.0])

    def forward(self, x):
        y = self.lin(x) * self.scale + self.mask
        self.steps.add_(1)
        self.ema.mul_(0.9).add_(y.detach().mean(0), alpha=0.1)
        return torch.tanh(y)


class NoGradRegion(nn.Module):
    """A `with torch.no_grad():` block whose result is also used with grad: the training IR keeps
    it as a grad-mode region (higher-order op wrap_with_set_grad_enabled). No core-ATen archive:
    run_decompositions() in torch 2.11 inlines the region without its no_grad, so a backward
    through that program differentiates the block (PyTorch's own ep.module() does too)."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(6, 6)
        self.register_buffer("ema", torch.zeros(6))

    def forward(self, x):
        y = self.lin(x)
        with torch.no_grad():
            batch_mean = y.mean(0)
            self.ema.mul_(0.9).add_(batch_mean, alpha=0.1)
        return torch.tanh(y) * batch_mean


class EvalClassifier(nn.Module):
    """An inference model: conv, BatchNorm and Dropout in eval mode, pooling, a linear head."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.bn = nn.BatchNorm2d(8)
        self.drop = nn.Dropout(0.5)
        self.fc = nn.Linear(8, 4)

    def forward(self, x):
        y = F.max_pool2d(F.relu(self.bn(self.conv(x))), 2)
        return F.softmax(self.fc(self.drop(y.mean((2, 3)))), dim=-1)


class DynamicMlp(nn.Module):
    """An MLP exported with a dynamic batch dimension (2..64)."""

    def __init__(self):
        super().__init__()
        self.l1 = nn.Linear(8, 16)
        self.l2 = nn.Linear(16, 4)

    def forward(self, x):
        h = F.relu(self.l1(x))
        return self.l2(h).view(x.shape[0], 2, 2)


class TiedLmHead(nn.Module):
    """A masked-LM head as BERT's: the decoder's weight is the word embedding's and its bias is the
    head's own `bias` parameter (two tied pairs, one tensor under two names each, as
    named_parameters(remove_duplicate=False) lists them); eager accumulates both uses of each
    into one .grad."""

    def __init__(self, vocab=32, dim=16):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.proj = nn.Linear(dim, dim)
        self.norm = nn.LayerNorm(dim)
        self.decoder = nn.Linear(dim, vocab)
        self.bias = nn.Parameter(torch.randn(vocab) * 0.1)
        self.decoder.weight = self.embed.weight
        self.decoder.bias = self.bias

    def forward(self, ids):
        h = self.norm(F.gelu(self.proj(self.embed(ids))))
        return self.decoder(h) + self.bias


class AutocastRegions(nn.Module):
    """torch.autocast regions, which the training IR keeps as wrap_with_autocast: a bfloat16 region
    (its linears run in bfloat16, eager's casts) with a disabled region nested inside it (float32
    again, as Llama's rotary embedding), then float32 code outside."""

    def __init__(self):
        super().__init__()
        self.lin1 = nn.Linear(8, 8)
        self.lin2 = nn.Linear(8, 4)

    def forward(self, x):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            h = F.relu(self.lin1(x))
            with torch.autocast("cpu", enabled=False):
                mix = torch.softmax(h.float() @ x.t(), dim=-1) @ x
            y = self.lin2(h + mix)
        return y.float().tanh(), mix


class VitEncoderBlock(nn.Module):
    """torchvision's ViT encoder block (pre-LN nn.MultiheadAttention, batch_first, and an MLP). On
    the CPU the attention's output permute is contiguous, so the export records `.contiguous()` as
    nothing and the head merge as a view, which another device's attention output would not
    allow (compiled for cuda:0, it must copy where eager's contiguous() copies)."""

    def __init__(self, dim=16, heads=2):
        super().__init__()
        self.ln1 = nn.LayerNorm(dim)
        self.attn = nn.MultiheadAttention(dim, heads, batch_first=True)
        self.ln2 = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 2 * dim), nn.GELU(), nn.Linear(2 * dim, dim))

    def forward(self, x):
        y = self.ln1(x)
        y, _ = self.attn(y, y, y, need_weights=False)
        x = x + y
        return x + self.mlp(self.ln2(x))


class ActivationFormulas(nn.Module):
    """Activations written out as formulas, as transformers writes them: GPT-2's gelu_new (with
    pow), BLOOM's factored tanh GELU, the erf GELU of older BERTs, and x * sigmoid(x). A compile
    traces each as the one ATen kernel (graph/formula_fusion.h); the last tanh's result is read
    twice (by the GELU formula and by the sum after it), so that formula stays as written."""

    def __init__(self):
        super().__init__()
        self.lins = nn.ModuleList(nn.Linear(8, 8) for _ in range(5))

    def forward(self, x):
        h = self.lins[0](x)
        h = 0.5 * h * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (h + 0.044715 * torch.pow(h, 3.0))))
        h = self.lins[1](h)
        h = h * 0.5 * (1.0 + torch.tanh(0.79788456 * h * (1 + 0.044715 * h * h)))
        h = self.lins[2](h)
        h = h * 0.5 * (1.0 + torch.erf(h / math.sqrt(2.0)))
        h = self.lins[3](h)
        h = h * torch.sigmoid(h)
        t = torch.tanh(math.sqrt(2.0 / math.pi) * (h + 0.044715 * torch.pow(h, 3.0)))
        return self.lins[4](0.5 * h * (1.0 + t) + t)


class MoeRouting(nn.Module):
    """A mixture of experts routed as transformers' Mixtral block routes (MixtralSparseMoeBlock):
    each token's top-2 experts by a softmax router, renormalised; each expert runs on the tokens
    routed to it, found with torch.where on the one-hot routing mask, so how many there are is a
    size read from tensor values (data-dependent: u0, u1, ... in the export); index_add_ sums the
    weighted results back. Such a program runs from C++ as exported; a compile refuses it."""

    def __init__(self, hidden=8, ffn=16, experts=4, top_k=2):
        super().__init__()
        self.gate = nn.Linear(hidden, experts, bias=False)
        self.experts = nn.ModuleList(
            nn.Sequential(nn.Linear(hidden, ffn), nn.SiLU(), nn.Linear(ffn, hidden)) for _ in range(experts))
        self.top_k = top_k

    def forward(self, x):
        weights = torch.softmax(self.gate(x), dim=-1)
        weights, chosen = torch.topk(weights, self.top_k, dim=-1)
        weights = weights / weights.sum(dim=-1, keepdim=True)
        mask = F.one_hot(chosen, num_classes=len(self.experts)).permute(2, 1, 0)  # [expert, slot, token]
        out = torch.zeros_like(x)
        for e, expert in enumerate(self.experts):
            slot, token = torch.where(mask[e])
            out.index_add_(0, token, expert(x[token]) * weights[token, slot, None])
        return out


def models():
    """(name, module factory, input factory, training, dynamic_shapes, with a core-ATen archive)
    per example model."""
    g = lambda: torch.Generator().manual_seed(7)
    return [
        ("resnet_bn_train", ResNetTrain, lambda: (torch.randn(4, 3, 16, 16, generator=g()),), True, None, True),
        ("gpt_block_loss", GptBlockLoss,
         lambda: (torch.randint(0, 32, (2, 8), generator=g()), torch.randint(0, 32, (2, 8), generator=g())),
         True, None, True),
        ("lstm_tagger", LstmTagger, lambda: (torch.randint(0, 20, (3, 7), generator=g()),), True, None, True),
        ("unet_decoder_block", UNetUpBlock,
         lambda: (torch.randn(2, 16, 4, 4, generator=g()), torch.randn(2, 8, 6, 6, generator=g())), True, None, True),
        ("buffer_mutation_const", BufferMutationConst, lambda: (torch.randn(5, 6, generator=g()),), True, None, True),
        ("no_grad_region", NoGradRegion, lambda: (torch.randn(5, 6, generator=g()),), True, None, False),
        ("eval_classifier", EvalClassifier, lambda: (torch.randn(2, 3, 8, 8, generator=g()),), False, None, True),
        ("tied_lm_head", TiedLmHead, lambda: (torch.randint(0, 32, (2, 6), generator=g()),), True, None, True),
        ("autocast_regions", AutocastRegions, lambda: (torch.randn(5, 8, generator=g()),), True, None, True),
        ("vit_encoder_block", VitEncoderBlock, lambda: (torch.randn(1, 5, 16, generator=g()),), True, None, True),
        ("activation_formulas", ActivationFormulas, lambda: (torch.randn(6, 8, generator=g()) * 2,), True, None,
         True),
        ("dynamic_mlp", DynamicMlp, lambda: (torch.randn(4, 8, generator=g()),), True,
         ({0: torch.export.Dim("batch", min=2, max=64)},), True),
    ]


def data_dependent_models():
    """Models with sizes read from tensor values: they run as exported but do not compile, so their
    archives live with the tests (tests/export/data_dependent/), not among the examples a batch
    compiles. Same tuples as models()."""
    g = lambda: torch.Generator().manual_seed(7)
    return [("moe_routing", MoeRouting, lambda: (torch.randn(10, 8, generator=g()),), True, None, True)]


def eager_step(model, args, training):
    """One step of the original module: outputs, and for training the gradients of a backward
    with fixed grad_outputs, then the buffers."""
    outs = model(*args)
    outs = list(outs) if isinstance(outs, (tuple, list)) else [outs]
    result = {"inputs": [a.clone() for a in args], "outputs": [o.detach().clone() for o in outs],
              "training": int(training), "grads": {}, "grad_outputs": []}
    if training:
        gen = torch.Generator().manual_seed(11)
        grad_outputs = [torch.randn(o.shape, generator=gen, dtype=o.dtype) for o in outs]
        torch.autograd.backward(outs, grad_outputs)
        result["grad_outputs"] = grad_outputs
        # Every name of a tied parameter, as the archive's signature lists each.
        result["grads"] = {n: p.grad.clone() for n, p in model.named_parameters(remove_duplicate=False)
                           if p.grad is not None}
    result["buffers"] = {n: b.clone() for n, b in model.named_buffers(remove_duplicate=False)}
    return result


def export_one(name, make_model, make_inputs, training, dynamic_shapes, with_aten, out_dir):
    torch.manual_seed(0)
    model = make_model()
    model.train(training)
    args = make_inputs()
    state = copy.deepcopy(model.state_dict(keep_vars=False))
    ep = torch.export.export(model, args, dynamic_shapes=dynamic_shapes)
    model.load_state_dict(state)  # export must not have moved the buffers; restore regardless
    torch.export.save(ep, os.path.join(out_dir, f"{name}.pt2"))
    if with_aten:
        torch.export.save(ep.run_decompositions(), os.path.join(out_dir, f"{name}.aten.pt2"))

    # The oracle: the original module, on a copy of the state the archive holds.
    eager = copy.deepcopy(model)
    expected = eager_step(eager, make_inputs(), training)
    # The archive must say the same when run by PyTorch itself (a check of this script).
    loaded = torch.export.load(os.path.join(out_dir, f"{name}.pt2")).module()
    check = eager_step(loaded, make_inputs(), training)
    for a, b in zip(expected["outputs"], check["outputs"]):
        torch.testing.assert_close(a, b)
    torch.save(expected, os.path.join(out_dir, f"{name}.expected.pt"))
    print(f"{name}: {len(list(model.parameters()))} parameters, {len(list(model.buffers()))} buffers, "
          f"{len(ep.graph.nodes)} nodes")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=os.path.dirname(os.path.abspath(__file__)))
    ap.add_argument("--data-dependent-out", default=os.path.join(os.path.dirname(os.path.dirname(
        os.path.dirname(os.path.abspath(__file__)))), "tests", "export", "data_dependent"))
    ap.add_argument("--only")
    opts = ap.parse_args()
    torch.use_deterministic_algorithms(True)
    for listed, out in ((models(), opts.out), (data_dependent_models(), opts.data_dependent_out)):
        for name, make_model, make_inputs, training, dyn, with_aten in listed:
            if opts.only and name != opts.only:
                continue
            export_one(name, make_model, make_inputs, training, dyn, with_aten, out)


if __name__ == "__main__":
    sys.exit(main())
