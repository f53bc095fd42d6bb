#!/usr/bin/env python3
"""Runs the Python twins of the metadata corpus (tests/stages/metadata/metadata_oracle.py) through
PyTorch's own functorch.compile.aot_function (nop compilers) under both partitioners, and compares
each with eager PyTorch the way tests/runtime/eager_check.cpp does (outputs: values,
requires_grad, is_leaf, aliasing with inputs and earlier outputs; inputs after the call;
gradients of the inputs' leaves; the grad mode left behind).

Prints one line per case and partitioner that PyTorch refuses or that differs from eager (all
lines with --all). This is how model_corpus_test's refused_cases() and shared_divergences() were
established: aotpipe may refuse or differ only where PyTorch does too.

    $AOTPIPE_PYTHON tests/models/python_aot_function_probe.py [--all] [CASE ...]
"""
import os
import sys
import warnings

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "stages", "metadata"))

import torch  # noqa: E402
from functorch.compile import aot_function, default_partition, min_cut_rematerialization_partition, nop  # noqa: E402
from metadata_oracle import CASES  # noqa: E402


def leaves_of(inputs):
    """The leaves the inputs were computed from, in eager_check.cpp's order."""
    leaves, seen, stack, visited = [], set(), [], set()
    for t in inputs:
        if not isinstance(t, torch.Tensor) or not t.requires_grad:
            continue
        if t.is_leaf:
            if id(t) not in seen:
                seen.add(id(t))
                leaves.append(t)
        else:
            stack.append(t.grad_fn)
    while stack:
        node = stack.pop()
        if node is None or node in visited:
            continue
        visited.add(node)
        if hasattr(node, "variable"):  # AccumulateGrad
            if id(node.variable) not in seen:
                seen.add(id(node.variable))
                leaves.append(node.variable)
            continue
        stack.extend(f for f, _ in node.next_functions)
    return leaves


def aliases(a, b):
    return a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr()


def call(case, fn):
    inputs = case.make_inputs()
    leaves = leaves_of(inputs)
    try:
        with torch.set_grad_enabled(case.grad_enabled):
            out = fn(*inputs)
            grad_mode_after = torch.is_grad_enabled()
    finally:
        torch.set_grad_enabled(True)  # a case may flip grad mode
    out = [out] if isinstance(out, torch.Tensor) else list(out)
    return inputs, leaves, out, grad_mode_after


def gradients(leaves, outputs):
    gen = torch.Generator().manual_seed(99)
    loss = None
    for o in outputs:
        if o.requires_grad and o.is_floating_point():
            term = (o * torch.randn(o.shape, generator=gen, dtype=o.dtype)).sum()
            loss = term if loss is None else loss + term
    if loss is None or not leaves:
        return []
    return torch.autograd.grad(loss, leaves, allow_unused=True)


def differences(case, partition):
    e_in, e_leaves, e_out, e_mode = call(case, case.fn)
    compiled = aot_function(case.fn, nop, partition_fn=partition,
                            keep_inference_input_mutations=case.keep_input_mutations)
    try:
        c_in, c_leaves, c_out, c_mode = call(case, compiled)
    except Exception as e:  # PyTorch refuses the program
        return [f"ERR {type(e).__name__}: {str(e).splitlines()[0]}"]
    diffs = []
    if e_mode != c_mode:
        diffs.append(f"grad mode after the call {e_mode} vs {c_mode}")
    if len(e_out) != len(c_out):
        return diffs + [f"{len(e_out)} vs {len(c_out)} outputs"]
    for i, (e, c) in enumerate(zip(e_out, c_out)):
        if e.shape != c.shape or not torch.allclose(e.detach().double(), c.detach().double(), equal_nan=True):
            diffs.append(f"output {i} values")
        if e.requires_grad != c.requires_grad:
            diffs.append(f"output {i} requires_grad {e.requires_grad} vs {c.requires_grad}")
        if e.is_leaf != c.is_leaf:
            diffs.append(f"output {i} is_leaf {e.is_leaf} vs {c.is_leaf}")
        diffs += [f"output {i} aliasing input {k}" for k in range(len(e_in)) if aliases(e, e_in[k]) != aliases(c, c_in[k])]
        diffs += [f"output {i} aliasing output {k}" for k in range(i) if aliases(e, e_out[k]) != aliases(c, c_out[k])]
    for k, (e, c) in enumerate(zip(e_in, c_in)):
        if e.shape != c.shape or e.stride() != c.stride() or not torch.allclose(e.detach().double(), c.detach().double()):
            diffs.append(f"input {k} after the call")
    try:
        e_grads, c_grads = gradients(e_leaves, e_out), gradients(c_leaves, c_out)
    except Exception as e:
        return diffs + [f"backward ERR {type(e).__name__}: {str(e).splitlines()[0]}"]
    if len(e_grads) != len(c_grads):
        return diffs + [f"{len(e_grads)} vs {len(c_grads)} gradients"]
    for k, (e, c) in enumerate(zip(e_grads, c_grads)):
        if (e is None) != (c is None):
            diffs.append(f"gradient {k} definedness {e is not None} vs {c is not None}")
        elif e is not None and not torch.allclose(e, c):
            diffs.append(f"gradient {k} values")
    return diffs


def main() -> int:
    warnings.simplefilter("ignore")
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    show_all = "--all" in sys.argv[1:]
    for name in args or list(CASES):
        for partition_name, partition in (("default", default_partition),
                                          ("min_cut", min_cut_rematerialization_partition)):
            diffs = differences(CASES[name], partition)
            if diffs or show_all:
                print(f"{name} [{partition_name}]: {'; '.join(diffs) or 'matches eager'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
