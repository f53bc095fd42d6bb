#!/usr/bin/env python3
"""Oracle for aotpipe's graph signature (tests/export/graph_signature_test.cpp).

For each case, a Python module equivalent to the C++ one of the test (same layers, attribute names,
shapes and training mode) goes through PyTorch's own
``torch._functorch.aot_autograd.aot_export_module`` (``trace_joint=True`` with
``output_loss_index`` where the module returns a loss, else ``trace_joint=False``, which traces
under ``torch.no_grad()``), and the GraphSignature it returns is turned into torch.export's
input/output specs. Prints ONE JSON object ``{case_name: {"input_specs": [...],
"output_specs": [...]}}`` in the form of aotpipe's ``to_json(ExportGraphSignature)``.

The specs are made here with the rules of ``torch.export.graph_signature._sig_to_specs`` /
``_convert_to_export_graph_signature``, not by calling the latter: in torch 2.11 it fails on
joint signatures (it reads ``backward_signature.gradients_to_parameter``, a misspelt field).
The loss is marked by position (mutated inputs come first, then the user outputs), as
``torch.export``'s joint export does (exported_program.py, ``joint_loss_index``):
``GraphSignature.backward_signature.loss_output`` names ``graph_output_names[loss_index]``
without skipping the mutated inputs, so with a buffer mutation it names the wrong value.

Usage: python graph_signature_oracle.py [--case NAME ...] [--list]
"""
from __future__ import annotations

import argparse
import json
import sys
import warnings
from dataclasses import dataclass
from typing import Callable

import torch
import torch.nn as nn
from torch._functorch.aot_autograd import aot_export_module


@dataclass
class Case:
    name: str
    make_module: Callable[[], nn.Module]
    make_inputs: Callable[[], tuple]
    loss_index: int | None  # None: trace_joint=False


class Mlp(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(6, 8)
        self.fc2 = nn.Linear(8, 4)

    def forward(self, x, target):
        return (((self.fc2(torch.relu(self.fc1(x))) - target) ** 2).mean(),)


class ConvBn(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(2, 3, 3)
        self.bn = nn.BatchNorm2d(3)

    def forward(self, x, target):
        return (((self.bn(self.conv(x)).relu() - target) ** 2).mean(),)


class ConvBnEval(ConvBn):
    def forward(self, x):
        return (self.bn(self.conv(x)),)


class LinearWithSteps(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 3)
        self.scale = nn.Parameter(torch.ones(3))
        self.register_buffer("steps", torch.zeros(1))


class MutateUserInput(LinearWithSteps):
    def forward(self, x):
        x.add_(1)
        return (self.fc(x) * self.scale,)


class BufferAndInputMutation(LinearWithSteps):
    def forward(self, x, factor):
        self.steps.add_(1)
        factor.mul_(2)
        loss = (self.fc(x) * self.scale * factor).sum()
        return (factor * 3, loss)


def train(m):
    return m.train()


def evaluate(m):
    return m.eval()


CASES = {
    c.name: c
    for c in [
        Case("mlp", lambda: train(Mlp()),
             lambda: (torch.randn(5, 6, requires_grad=True), torch.randn(5, 4)), 0),
        Case("conv_bn_train", lambda: train(ConvBn()),
             lambda: (torch.randn(2, 2, 5, 5), torch.randn(2, 3, 3, 3)), 0),
        Case("conv_bn_eval", lambda: evaluate(ConvBnEval()), lambda: (torch.randn(2, 2, 5, 5),), None),
        Case("mutate_user_input", lambda: train(MutateUserInput()), lambda: (torch.randn(2, 4),), None),
        Case("buffer_and_input_mutation", lambda: train(BufferAndInputMutation()),
             lambda: (torch.randn(2, 4), torch.randn(3)), 1),
    ]
}


def specs(case: Case) -> dict:
    module = case.make_module()
    args = case.make_inputs()
    gm, sig = aot_export_module(module, args, trace_joint=case.loss_index is not None,
                                output_loss_index=case.loss_index)
    nodes = list(gm.graph.nodes)
    input_names = [n.name for n in nodes if n.op == "placeholder"]
    output_names = [getattr(o, "name", None) for o in nodes[-1].args[0]]

    def input_spec(name):
        if name in sig.inputs_to_parameters:
            return {"kind": "PARAMETER", "arg": {"name": name}, "target": sig.inputs_to_parameters[name],
                    "persistent": None}
        if name in sig.inputs_to_buffers:
            return {"kind": "BUFFER", "arg": {"name": name}, "target": sig.inputs_to_buffers[name],
                    "persistent": True}
        assert name in sig.user_inputs, name
        return {"kind": "USER_INPUT", "arg": {"name": name}, "target": None, "persistent": None}

    backward = sig.backward_signature
    num_mutations = len(sig.buffers_to_mutate) + len(sig.parameters_to_mutate) + len(sig.user_inputs_to_mutate)

    def output_spec(idx, name):
        def spec(kind, target=None):
            return {"kind": kind, "arg": {"name": name}, "target": target}

        if idx < num_mutations:
            for kind, mapping in (("BUFFER_MUTATION", sig.buffers_to_mutate),
                                  ("PARAMETER_MUTATION", sig.parameters_to_mutate),
                                  ("USER_INPUT_MUTATION", sig.user_inputs_to_mutate)):
                if name in mapping:
                    return spec(kind, mapping[name])
            raise AssertionError(f"unknown mutation output {name}")
        if case.loss_index is not None and idx == num_mutations + case.loss_index:
            return spec("LOSS_OUTPUT")
        if name in sig.user_outputs:
            return spec("USER_OUTPUT")
        if backward is not None and name in backward.gradients_to_parameters:
            return spec("GRADIENT_TO_PARAMETER", backward.gradients_to_parameters[name])
        if backward is not None and name in backward.gradients_to_user_inputs:
            return spec("GRADIENT_TO_USER_INPUT", backward.gradients_to_user_inputs[name])
        raise AssertionError(f"unknown output {name}")

    return {
        "input_specs": [input_spec(n) for n in input_names],
        "output_specs": [output_spec(i, n) for i, n in enumerate(output_names)],
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--case", action="append", help="run only these cases")
    parser.add_argument("--list", action="store_true", help="print the case names")
    opts = parser.parse_args()
    if opts.list:
        print("\n".join(CASES))
        return 0
    names = opts.case or list(CASES)
    unknown = [n for n in names if n not in CASES]
    if unknown:
        print(f"unknown case(s): {', '.join(unknown)}", file=sys.stderr)
        return 2
    torch.manual_seed(0)
    warnings.filterwarnings("ignore")
    print(json.dumps({n: specs(CASES[n]) for n in names}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
