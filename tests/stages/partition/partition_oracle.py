#!/usr/bin/env python3
"""PyTorch's own partitioners on the functions of partition_cases.cpp (same names and shapes).

For each function, runs aot_function(f, fw_compiler=nop, bw_compiler=nop, partition_fn=...) with
PyTorch's min_cut_rematerialization_partition and default_partition, and records what the
forward saves for the backward (the forward graph's outputs after the forward outputs).

Every function is partitioned twice per partitioner:
  - "raw": the joint graph exactly as aot_function traced it;
  - "same_ops": the joint graph with aten.detach nodes folded into their input first. The
    Python joint has a `detach` wherever autograd saved an op's *output* for the backward
    (SavedVariable::tensor_data() dispatches aten.detach on a Python tensor subclass); the C++
    tracer's tensors detach without dispatching, so aotpipe's joint graphs have no such nodes.
    detach is an identity on data, so "same_ops" is the graph aotpipe partitions.

Prints one JSON object: {name: {variant: {min_cut_saved_bytes, default_saved_bytes,
min_cut_saved_names, min_cut_saved_ops, default_saved_names, default_saved_ops,
min_cut_recomputed, min_cut_saved_bytes_detach_resolved,
default_saved_bytes_detach_resolved}}, "_op_lists": {...}}.
"""
import json
import operator
import sys

import torch
from functorch.compile import aot_function, default_partition, min_cut_rematerialization_partition, nop
from torch._functorch.partitioners import get_default_op_list


# Not here: closure_constant (aot_function's fake mode refuses closed-over real tensors).
def cases():
    def gen():
        g = torch.Generator().manual_seed(1234)
        return g

    def randn(*sizes, g, rg=True):
        return torch.randn(*sizes, generator=g).requires_grad_(rg)

    def mlp(x, w1, b1, w2):
        return torch.mm(torch.relu(torch.mm(x, w1) + b1), w2)

    def layer_norm_ish(x, w, b):
        m = x.mean(-1, keepdim=True)
        v = (x - m).pow(2).mean(-1, keepdim=True)
        return (x - m) / torch.sqrt(v + 1e-5) * w + b

    def conv_relu(x, w, b):
        return torch.ops.aten.convolution(x, w, b, [1, 1], [1, 1], [1, 1], False, [0, 0], 1).relu()

    def gelu_chain(x, w):
        for _ in range(3):
            x = torch.nn.functional.gelu(torch.mm(x, w)) * 0.5 + x
        return x

    def partial_grad(x, y):
        t = (x * y).sin()
        return t.exp(), y.cos()

    def dropout_mul(x):
        out, mask = torch.ops.aten.native_dropout(x, 0.5, True)
        return out * x

    def sin_chain(x):
        for _ in range(300):
            x = x.sin()
        return x

    def ladder(h, w):
        for _ in range(40):
            h = torch.tanh(torch.mm(h, w)) + h.sin() * h
        return h

    def view_outputs(x):
        y = x.exp()
        return x.t(), y.view(-1), y.sum()

    def c(f, *shapes, no_grad=()):
        def inputs():
            g = gen()
            return [randn(*s, g=g, rg=(i not in no_grad)) for i, s in enumerate(shapes)]
        return f, inputs

    return {
        "mlp": c(mlp, (8, 16), (16, 32), (32,), (32, 4)),
        "cos3": c(lambda x: x.cos().cos().cos(), (3,)),
        "mul3": c(lambda x: x * x * x, (3,)),
        "add4_cos2": c(lambda a, b, c_, d: (a + b + c_ + d).cos().cos(), (3,), (3,), (3,), (3,)),
        "mm_tanh": c(lambda x: torch.mm(x, torch.ones(x.shape)).tanh().tanh(), (5, 5)),
        "softmax": c(lambda x: torch.softmax(x, -1), (4, 8)),
        "layer_norm_ish": c(layer_norm_ish, (4, 8), (8,), (8,)),
        "layer_norm": c(lambda x, w, b: torch.nn.functional.layer_norm(x, [8], w, b, 1e-5), (4, 8), (8,), (8,)),
        "conv_relu": c(conv_relu, (2, 3, 8, 8), (4, 3, 3, 3), (4,)),
        "sum_dim": c(lambda x: x.sum(1), (10, 10)),
        "gelu_chain": c(gelu_chain, (16, 32), (32, 32)),
        "partial_grad": c(partial_grad, (6,), (6,), no_grad=(1,)),
        "dropout_mul": c(dropout_mul, (16,)),
        "sin_chain": c(sin_chain, (8,)),
        "ladder": c(ladder, (16, 16), (16, 16)),
        "view_outputs": c(view_outputs, (3, 4)),
    }


def op_name(node):
    if node.op == "placeholder":
        return "input"
    t = node.target
    if t is operator.getitem:
        return "getitem"
    if isinstance(t, torch._ops.OpOverload):
        ns, rest = t.name().split("::")
        base, _, overload = rest.partition(".")
        return f"{ns}::{base}" + ("" if overload in ("", "default") else f".{overload}")
    return str(t)


def nbytes(node):
    val = node.meta.get("val")
    if isinstance(val, torch.Tensor):
        return val.numel() * val.dtype.itemsize
    return 0


def fold_detach(gm):
    for node in list(gm.graph.nodes):
        if node.op == "call_function" and node.target is torch.ops.aten.detach.default:
            node.replace_all_uses_with(node.args[0])
            gm.graph.erase_node(node)
    gm.recompile()


def recording(partition, record, fold):
    def partition_fn(joint, joint_inputs, *, num_fwd_outputs, **kwargs):
        if fold:
            fold_detach(joint)
        fw, bw = partition(joint, joint_inputs, num_fwd_outputs=num_fwd_outputs, **kwargs)
        outputs = next(iter(fw.graph.find_nodes(op="output"))).args[0]
        saved = [n for n in outputs[num_fwd_outputs:] if isinstance(n, torch.fx.Node)]
        record["saved_names"] = [n.name for n in saved]
        record["saved_ops"] = [op_name(n) for n in saved]
        record["saved_bytes"] = sum(nbytes(n) for n in saved)
        # The same values with every `detach` resolved to the value it detaches, each counted once.
        resolved = {}
        for n in saved:
            while n.op == "call_function" and n.target is torch.ops.aten.detach.default:
                n = n.args[0]
            resolved[n.name] = nbytes(n)
        record["saved_bytes_detach_resolved"] = sum(resolved.values())
        fw_names = {n.name for n in fw.graph.nodes if n.op == "call_function"}
        record["recomputed"] = [n.name for n in bw.graph.nodes if n.op == "call_function" and n.name in fw_names]
        return fw, bw

    return partition_fn


def run_case(f, make_inputs, partition, fold):
    record = {}
    compiled = aot_function(f, fw_compiler=nop, bw_compiler=nop, partition_fn=recording(partition, record, fold))
    inputs = make_inputs()
    outs = compiled(*inputs)
    outs = outs if isinstance(outs, (tuple, list)) else (outs,)
    outs = [o for o in outs if o.requires_grad]
    torch.autograd.grad(outs, [i for i in inputs if i.requires_grad], [torch.ones_like(o) for o in outs])
    return record


def op_lists():
    ops = get_default_op_list()

    def names(s):
        out = set()
        for op in s:
            if isinstance(op, torch._ops.OpOverloadPacket) and op._qualified_op_name.startswith("aten::"):
                out.add(op._qualified_op_name)
        return sorted(out)

    return {
        "recomputable": names(ops.recomputable_ops),
        "view": names(ops.view_ops),
        "random": names(ops.random_ops),
        "compute_intensive": names(ops.compute_intensive_ops),
    }


def main():
    only = set(sys.argv[1:])
    result = {}
    for name, (f, make_inputs) in cases().items():
        if only and name not in only:
            continue
        result[name] = {}
        for variant, fold in (("raw", False), ("same_ops", True)):
            mc = run_case(f, make_inputs, min_cut_rematerialization_partition, fold)
            df = run_case(f, make_inputs, default_partition, fold)
            result[name][variant] = {
                "min_cut_saved_bytes": mc["saved_bytes"],
                "min_cut_saved_names": mc["saved_names"],
                "min_cut_saved_ops": mc["saved_ops"],
                "min_cut_recomputed": mc["recomputed"],
                "default_saved_bytes": df["saved_bytes"],
                "default_saved_names": df["saved_names"],
                "default_saved_ops": df["saved_ops"],
                "min_cut_saved_bytes_detach_resolved": mc["saved_bytes_detach_resolved"],
                "default_saved_bytes_detach_resolved": df["saved_bytes_detach_resolved"],
            }
    result["_op_lists"] = op_lists()
    result["_torch_version"] = torch.__version__
    json.dump(result, sys.stdout, indent=1, sort_keys=True)
    print()


if __name__ == "__main__":
    main()
