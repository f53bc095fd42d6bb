#!/usr/bin/env python3
"""Writes the example graphs of examples/*.aotg in aotpipe's IR text form (docs/ir.md).

Each example is a small PyTorch function with real model shapes. It is traced to ATen ops with
make_fx, then the traced graph is run once on real CPU tensors, recording every value, so each
value's TensorMeta (sizes, strides, storage offset, dtype) is exactly what the CPU kernels
produce (what `aotpipe run --check-meta` compares with); then it is translated node by node.
Tensors the function closes over become named tensor constants: `constant("key")`.

Reproducible: no randomness reaches the output, which depends only on the torch version
(tested with 2.11.0). Run from anywhere:

    $AOTPIPE_PYTHON examples/generate.py            # rewrites examples/*.aotg
    $AOTPIPE_PYTHON examples/generate.py --check    # exit 1 if a file would change
"""
import argparse
import inspect
import math
import operator
import pathlib
import sys

import torch
import torch.nn.functional as F
from torch.fx.experimental.proxy_tensor import make_fx

HERE = pathlib.Path(__file__).resolve().parent

DTYPE_SHORT = {
    torch.float32: "f32", torch.float64: "f64", torch.float16: "f16", torch.bfloat16: "bf16",
    torch.int64: "i64", torch.int32: "i32", torch.int16: "i16", torch.int8: "i8", torch.uint8: "u8",
    torch.bool: "b8", torch.complex64: "c64", torch.complex128: "c128",
}


def contiguous_strides(sizes):
    strides, acc = [], 1
    for s in reversed(sizes):
        strides.append(acc)
        acc *= max(s, 1)
    return list(reversed(strides))


def tensor_type(t):
    sizes = list(t.shape)
    text = f"{DTYPE_SHORT[t.dtype]}[{', '.join(map(str, sizes))}]"
    if list(t.stride()) != contiguous_strides(sizes):
        text += f" stride=[{', '.join(map(str, t.stride()))}]"
    if t.storage_offset() != 0:
        text += f" offset={t.storage_offset()}"
    if t.device.type != "cpu":
        text += f" device={t.device}"
    return text


def fmt_float(v):
    if math.isnan(v):
        return "nan"
    if math.isinf(v):
        return "inf" if v > 0 else "-inf"
    text = repr(float(v))
    return text if ("." in text or "e" in text) else text + ".0"


class Recorder(torch.fx.Interpreter):
    """Runs a traced graph on real tensors and keeps every node's result."""

    def __init__(self, gm):
        super().__init__(gm)
        self.values = {}

    def run_node(self, n):
        out = super().run_node(n)
        self.values[n] = out
        return out


class Translator:
    def __init__(self, name, gm, values, param_names, constants):
        self.name, self.gm, self.values = name, gm, values
        self.param_names, self.constants = param_names, constants
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
        return node.target

    def translate(self):
        nodes = list(self.gm.graph.nodes)
        placeholders = [n for n in nodes if n.op == "placeholder"]
        params = []
        for n, pname in zip(placeholders, self.param_names):
            self.names[n] = self.fresh(pname)
            params.append(f"%{self.names[n]}: {tensor_type(self.values[n])}")
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

    def call(self, n):
        op = n.target
        schema = op._schema
        # make_fx records `x * 0.5` as aten::mul.Tensor with a Python number where the schema
        # says Tensor (eager wraps it); the IR wants the overload that takes a Scalar.
        wrapped = [isinstance(a, (int, float)) and not isinstance(a, bool) and str(f.type) == "Tensor"
                   for a, f in zip(n.args, schema.arguments)]
        if any(wrapped) and hasattr(op.overloadpacket, "Scalar"):
            op = op.overloadpacket.Scalar
            schema = op._schema
        qual = schema.name + ("." + schema.overload_name if schema.overload_name else "")
        val = self.values[n]
        if isinstance(val, torch.Tensor):
            self.names[n] = self.fresh(n.name)
            decls = [f"%{self.names[n]}: {tensor_type(val)}"]
        else:  # a tuple or list of tensors: one declared value per element
            getitems = {u.args[1]: u for u in n.users if u.target is operator.getitem}
            decls = []
            for i, t in enumerate(val):
                user = getitems.get(i)
                name = self.fresh(user.name if user is not None else f"{n.name}_out{i}")
                if user is not None:
                    self.names[user] = name
                decls.append(f"%{name}: {tensor_type(t)}")
        args = [self.arg(a) for a in n.args]
        args += [f"{k}={self.arg(v)}" for k, v in n.kwargs.items()]
        return f"{', '.join(decls)} = {qual}({', '.join(args)})"


# --- the examples ---------------------------------------------------------------------------
# Each entry: name, description, function, example input specs (shape, dtype), constants.
EXAMPLES = []


def example(description, inputs, constants=None):
    def register(fn):
        EXAMPLES.append((fn.__name__, description, fn, inputs, constants or {}))
        return fn
    return register


def spec(*shape, dtype=torch.float32):
    return (shape, dtype)


@example("MNIST MLP hidden layer: linear 784 -> 256 (t + addmm) and relu, batch 64",
         [spec(64, 784), spec(256, 784), spec(256)])
def mlp_layer(x, weight, bias):
    return (torch.relu(F.linear(x, weight, bias)),)


@example("ResNet basic block stem: 3x3 conv 64 -> 64, training-mode batch norm, relu; 4 x 64 x 56 x 56",
         [spec(4, 64, 56, 56), spec(64, 64, 3, 3), spec(64), spec(64), spec(64), spec(64)])
def conv_bn_relu(x, conv_weight, bn_weight, bn_bias, running_mean, running_var):
    y = torch.ops.aten.convolution(x, conv_weight, None, [1, 1], [1, 1], [1, 1], False, [0, 0], 1)
    out, save_mean, save_invstd = torch.ops.aten.native_batch_norm(
        y, bn_weight, bn_bias, running_mean, running_var, True, 0.1, 1e-5)
    return (torch.relu(out), save_mean, save_invstd)


@example("BERT-base self-attention scores: 12 heads, sequence 128, head dim 64, batch 2 "
         "(bmm, scaled _softmax, bmm)",
         [spec(2, 12, 128, 64), spec(2, 12, 128, 64), spec(2, 12, 128, 64)])
def attention_scores(q, k, v):
    b, h, s, d = q.shape
    qf, kf, vf = q.reshape(b * h, s, d), k.reshape(b * h, s, d), v.reshape(b * h, s, d)
    scores = torch.bmm(qf, kf.transpose(1, 2)) * (1.0 / math.sqrt(d))
    probs = torch.ops.aten._softmax(scores, -1, False)
    return (torch.bmm(probs, vf).view(b, h, s, d), probs)


@example("Transformer layer norm over the hidden size 768 (native_layer_norm), batch 2 x 128 tokens",
         [spec(2, 128, 768), spec(768), spec(768)])
def layer_norm(x, weight, bias):
    out, mean, rstd = torch.ops.aten.native_layer_norm(x, [768], weight, bias, 1e-12)
    return (out, mean, rstd)


_lstm_gen = torch.Generator().manual_seed(0)
LSTM_CONSTANTS = {
    "lstm.weight_ih": torch.randn(2048, 256, generator=_lstm_gen),
    "lstm.weight_hh": torch.randn(2048, 512, generator=_lstm_gen),
    "lstm.bias": torch.randn(2048, generator=_lstm_gen),
}


@example("LSTM cell, input 256, hidden 512, batch 16; weights are named tensor constants "
         "(mm, add, chunk -> split, sigmoid, tanh)",
         [spec(16, 256), spec(16, 512), spec(16, 512)], LSTM_CONSTANTS)
def lstm_cell(x, h, c):
    w_ih, w_hh, b = LSTM_CONSTANTS["lstm.weight_ih"], LSTM_CONSTANTS["lstm.weight_hh"], LSTM_CONSTANTS["lstm.bias"]
    gates = torch.mm(x, w_ih.t()) + torch.mm(h, w_hh.t()) + b
    i, f, g, o = gates.chunk(4, 1)
    c_next = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
    h_next = torch.sigmoid(o) * torch.tanh(c_next)
    return (h_next, c_next)


@example("Views of an image batch 8 x 3 x 32 x 32 and a weight 128 x 64: t, view, slice, permute, "
         "transpose, select, unsqueeze, expand, diagonal (outputs alias their inputs, strides kept)",
         [spec(8, 3, 32, 32), spec(128, 64)])
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


@example("Reductions over ImageNet logits 32 x 1000: sum, mean, amax, argmax, logsumexp, "
         "log_softmax, var, cumsum",
         [spec(32, 1000)])
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


@example("Instance normalization of 8 x 64 x 32 x 32 feature maps from var_mean (a multi-output op)",
         [spec(8, 64, 32, 32)])
def instance_norm_var_mean(x):
    var, mean = torch.var_mean(x, [2, 3], correction=0, keepdim=True)
    return ((x - mean) * torch.rsqrt(var + 1e-5), var, mean)


@example("Transformer feed-forward block, hidden 768 -> 3072 -> 768, gelu, 2 x 128 tokens "
         "(view + addmm + view)",
         [spec(2, 128, 768), spec(3072, 768), spec(3072), spec(768, 3072), spec(768)])
def transformer_ffn(x, w1, b1, w2, b2):
    return (F.linear(F.gelu(F.linear(x, w1, b1)), w2, b2),)


@example("Embedding lookup of 4 x 16 token ids (vocabulary 8) into 32 features, concatenated with a "
         "positional table and mean-pooled",
         [spec(4, 16, dtype=torch.int64), spec(8, 32), spec(4, 16, 32)])
def embedding_concat(tokens, table, positions):
    emb = F.embedding(tokens, table)
    both = torch.cat([emb, positions], dim=2)
    return (both.mean(1),)


def trace(name, fn, inputs, constants):
    def make(shape, dtype):
        return torch.zeros(shape, dtype=dtype)  # values do not matter, metadata does
    args = [make(shape, dtype) for shape, dtype in inputs]
    gm = make_fx(fn, tracing_mode="real")(*args)
    recorder = Recorder(gm)
    with torch.no_grad():
        recorder.run(*[make(shape, dtype) for shape, dtype in inputs])
    param_names = list(inspect.signature(fn).parameters)
    return Translator(name, gm, recorder.values, param_names, constants).translate()


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true", help="only check that the files are up to date")
    parser.add_argument("--out", type=pathlib.Path, default=HERE, help="output directory (default: examples/)")
    opts = parser.parse_args()
    stale = []
    for name, description, fn, inputs, constants in EXAMPLES:
        header = f"# {description}.\n# Generated by examples/generate.py (torch {torch.__version__.split('+')[0]}); edit that, not this file.\n"
        text = header + trace(name, fn, inputs, constants)
        path = opts.out / f"{name}.aotg"
        if opts.check:
            if not path.exists() or path.read_text() != text:
                stale.append(path)
        else:
            path.write_text(text)
            print(path)
    if stale:
        print("out of date:", *map(str, stale), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
