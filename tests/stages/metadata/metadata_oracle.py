#!/usr/bin/env python3
"""Differential-test oracle for aotpipe::collect_metadata (issue #5).

Defines the metadata corpus: named cases, each a user function ``f(*args)``, a function making its
example inputs and flags. For each case it runs PyTorch's own
``run_functionalized_fw_and_collect_metadata`` on fake copies of the inputs (aliasing kept through
one FakeTensorMode converter) and prints ONE JSON object ``{case_name: metadata_json}`` with
PyTorch's field names (see shared/design/api.md, ``to_json``).

The same cases, with the same names, are written in C++ in metadata_corpus.cpp; keep the two in
step. Most cases are ported from test/functorch/test_aotdispatch.py (names say which).

Usage: python metadata_oracle.py [--case NAME ...] [--list] [--derived] [--indent N]
A case whose analysis raises (PyTorch refuses the program) is printed as {"error": "<message>"}.
--derived adds to each case a "derived" object (not part of to_json's format): the lists and counts
ViewAndMutationMeta.__post_init__ derives, is_train, grad_enabled_mutation and the traced tangents'
strides, which the C++ test compares with the struct's fields.
"""
from __future__ import annotations

import argparse
import json
import sys
import warnings
from dataclasses import dataclass
from typing import Callable

import torch

from torch._functorch._aot_autograd.collect_metadata_analysis import (
    run_functionalized_fw_and_collect_metadata,
)
from torch._functorch._aot_autograd.descriptors import PlainAOTInput
from torch._subclasses.fake_tensor import FakeTensorMode


@dataclass
class Case:
    name: str
    fn: Callable
    make_inputs: Callable[[], list]
    keep_input_mutations: bool = False
    # False: the whole analysis runs under torch.no_grad() (an inference compile).
    grad_enabled: bool = True


CASES: dict[str, Case] = {}


def case(make_inputs, keep_input_mutations=False, grad_enabled=True, name=None):
    def register(fn):
        n = name or fn.__name__
        assert n not in CASES, n
        CASES[n] = Case(n, fn, make_inputs, keep_input_mutations, grad_enabled)
        return fn

    return register


# ---- input makers (deterministic: ones/arange; `rg` says requires_grad) -----------------------

def ones(*shape, rg=False):
    return torch.ones(*shape, requires_grad=rg)


def nonleaf(*shape):
    """A non-leaf that requires grad: ones(...).clone() of a leaf requiring grad."""
    return torch.ones(*shape, requires_grad=True).clone()


def arange_f(n, rg=False):
    return torch.arange(n, dtype=torch.float32, requires_grad=rg)


# =================================================================================================
# No mutation, plain outputs
# =================================================================================================

@case(lambda: [ones(3, 3, rg=True), ones(3, 3)])
def no_mutation_multi_output(a, b):
    # test_multi_output
    return a + b, a - b


@case(lambda: [ones(3, 3), ones(3, 3)])
def no_mutation_no_grad_inputs(a, b):
    return a * b, a.sum()


@case(lambda: [ones(2, 3, rg=True)])
def non_alias_dtype_and_noncontiguous(a):
    # tangents: a float64 output and a non-contiguous float32 output (tangent is contiguous)
    return a.double() * 2, a.t() * 3, (a > 0)


# =================================================================================================
# Data mutations
# =================================================================================================

@case(lambda: [nonleaf(3, 3)])
def input_mutation_simple(a):
    # test_input_mutation_simple
    a.mul_(2)
    return a * 3


@case(lambda: [ones(3, 3)])
def input_mutation_simple_no_grad_input(a):
    a.mul_(2)
    return a * 3


@case(lambda: [ones(3, 3)], keep_input_mutations=True)
def input_mutation_simple_keep(a):
    a.mul_(2)
    return a * 3


@case(lambda: [nonleaf(3, 3)], keep_input_mutations=True)
def input_mutation_simple_keep_requires_grad(a):
    a.mul_(2)
    return a * 3


@case(lambda: [nonleaf(3, 3)])
def input_mutation_is_output(a):
    # test_input_mutation_is_output
    a.mul_(2)
    return a


@case(lambda: [nonleaf(3, 3), nonleaf(3, 3), nonleaf(3, 3)])
def input_mutation_multiple(a, b, c):
    # test_input_mutation_multiple
    a.mul_(2)
    c.mul_(2)
    return a + b + c


@case(lambda: [nonleaf(3, 3), ones(3, 3)], keep_input_mutations=True)
def input_mutation_mixed_requires_grad_keep(a, b):
    a.add_(1)
    b.add_(1)
    return a * b


@case(lambda: [nonleaf(4, 4)])
def input_mutation_through_view(a):
    a.view(-1)[0:4].mul_(2)
    return a + 1


@case(lambda: [ones(4)])
def input_mutation_no_outputs(a):
    # test_mutates_input_noncontiguous-like: nothing returned
    a.add_(1)
    return ()


# =================================================================================================
# Metadata mutations (t_, transpose_, unsqueeze_, as_strided_), data + metadata
# =================================================================================================

@case(lambda: [nonleaf(3, 3), nonleaf(3, 3)])
def input_mutation_metadata(a, b):
    # test_input_mutation_metadata
    a.transpose_(1, 0)
    return a + b


@case(lambda: [ones(3, 3), ones(3, 3)], keep_input_mutations=True)
def input_mutation_metadata_keep(a, b):
    a.transpose_(1, 0)
    return a + b


@case(lambda: [nonleaf(3, 3)])
def input_mutation_metadata2(a):
    # test_input_mutation_metadata2: metadata then data mutation
    a.transpose_(1, 0)
    a.mul_(2)
    return a + 1


@case(lambda: [ones(3, 3)], keep_input_mutations=True)
def input_mutation_metadata2_keep(a):
    a.transpose_(1, 0)
    a.mul_(2)
    return a + 1


@case(lambda: [nonleaf(2, 3)])
def input_mutation_unsqueeze_(a):
    a.unsqueeze_(0)
    return a * 2


@case(lambda: [nonleaf(2, 2)])
def input_mutation_as_strided_(a):
    a.as_strided_((2, 2), (1, 2))
    return a * 2


@case(lambda: [nonleaf(3, 3)])
def input_data_and_metadata_mutation(a):
    # test_input_data_and_metadata_mutation
    a.t_()
    a[0].mul_(2)
    return a.view(a.shape)


@case(lambda: [nonleaf(3, 3), nonleaf(3, 3)])
def view_and_inplace_view(a, b):
    # test_view_and_inplace_view
    a.t_()
    return b.view(b.shape), a.view(a.shape)


# =================================================================================================
# Outputs aliasing inputs
# =================================================================================================

@case(lambda: [ones(2, 2, rg=True).add(1)])
def input_output_view_simple(a):
    # test_input_output_view_simple
    return a.view(-1)


@case(lambda: [ones(2, 2).add(1)])
def input_output_view_simple_no_grad(a):
    return a.view(-1)


@case(lambda: [ones(2, 2, rg=True).add(1) for _ in range(3)])
def input_output_view_mutate_multiple(a, b, c):
    # test_input_output_view_mutate_multiple
    a.mul_(2)
    c.mul_(3)
    return b.view(2, 2), c.view(2, 2)


@case(lambda: [ones(2, 2, rg=True).add(1) for _ in range(3)])
def input_output_view_metadata_mutate_multiple(a, b, c):
    # test_input_output_view_metadata_mutate_multiple
    b.mul_(3)
    c.t_()
    return a.view(2, 2), b.view(2, 2), c.view(2, 2)


@case(lambda: [ones(2, 2, rg=True).add(1)])
def input_mutation_and_output_view(a):
    # test_input_mutation_and_output_view
    a.add_(1)
    return a.view(-1)


@case(lambda: [
    torch.arange(4, requires_grad=True, dtype=torch.float32).view(2, 2).add(1),
    torch.arange(4, requires_grad=True, dtype=torch.float32).view(2, 2).add(1),
    ones(2, 2, rg=True).add(1),
    ones(2, 2, rg=True).add(1),
])
def input_mutation_output_view_multiple(a, b, c, d):
    # test_input_mutation_output_view_multiple
    b.transpose_(1, 0)
    c.add_(1)
    return d + 1, b.diagonal(), a + c


@case(lambda: [nonleaf(3, 3)])
def input_returned_twice(a):
    return a, a


@case(lambda: [nonleaf(3, 3)])
def input_detach_returned(a):
    # an alias of an input that does not require grad
    return a.detach(), a * 2


@case(lambda: [ones(3, 3, rg=True)])
def output_aliases_input_multi_output_view(a):
    # test_output_aliases_input_multi_output_view (f1): aliasing hidden from autograd
    return list(a.unbind(0))


@case(lambda: [nonleaf(3, 3)])
def output_aliases_input_multi_output_view_and_view(a):
    # test_output_aliases_input_multi_output_view (f3)
    return *list(a.unbind(0)), a.view(a.shape)


@case(lambda: [ones(4, 2)])
def output_aliases_input_chunk_no_grad(a):
    return list(a.chunk(2))


@case(lambda: [nonleaf(3, 3)])
def view_detach(a):
    # test_view_detach
    tmp = a.detach()
    a.mul_(2)
    return a, tmp


# =================================================================================================
# Outputs aliasing intermediates
# =================================================================================================

@case(lambda: [ones(3, 3, rg=True)])
def output_aliases_intermediate_single(a):
    # test_output_aliases_intermediate_single: unsafe_view_alias
    out = torch.mul(a, 3)
    return out.view(-1)


@case(lambda: [ones(3, 3)])
def output_aliases_intermediate_single_no_grad(a):
    out = torch.mul(a, 3)
    return out.view(-1)


@case(lambda: [ones(3, 3, rg=True)])
def output_aliases_intermediate_multiple(a):
    # test_output_aliases_intermediate_multiple
    out = torch.mul(a, 3)
    return out.view(-1), out.view(-1)


@case(lambda: [ones(3, 3, rg=True)])
def output_aliases_intermediate_and_returned(a):
    # test_output_aliases_intermediate_and_returned
    out = torch.mul(a, 3)
    return out.view(-1), out


@case(lambda: [ones(3, 3, rg=True)])
def output_aliases_intermediate_and_returned_flipped(a):
    # test_output_aliases_intermediate_and_returned_flipped
    out = torch.mul(a, 3)
    return out, out.view(-1)


@case(lambda: [ones(3, 3, rg=True)])
def output_aliases_intermediate_and_returned_different_grad(a):
    # test_output_aliases_intermediate_and_returned_different_grad
    out = torch.mul(a, 3)
    return out.view(-1), out, out[0].detach()


@case(lambda: [ones(3, 3, rg=True)])
def output_aliases_intermediate_returned_multiple_times(a):
    # test_output_aliases_intermediate_returned_multiple_times
    out = torch.mul(a, 3)
    out_view = out.view(-1)
    return out, out_view, out


@case(lambda: [ones(3, 3), ones(3, 3, rg=True)])
def output_aliases_intermediate_no_grad(a, b):
    # test_output_aliases_intermediate_no_grad: the base does not require grad
    out = torch.mul(a, 3)
    return out.view(-1), b.add(1)


@case(lambda: [ones(3, 3, rg=True)])
def output_aliases_intermediate_multiple_mixed(a):
    # test_output_aliases_intermediate_multiple_mixed
    out1 = torch.mul(a, 3)
    out2 = torch.mul(a, 4)
    return out1.view(-1), out2.transpose(1, 0), out1.transpose(1, 0)


@case(lambda: [ones(2, 4, rg=True)])
def output_aliases_intermediate_inplace_view_with_detach(a):
    # test_output_aliases_intermediate_inplace_view_with_detach
    out = torch.mul(a, 3)
    out.t_()
    out.detach_()
    return out, a + 1


@case(lambda: [ones(1, 2, 4, rg=True).clone()])
def output_all_alias_types(a):
    # test_output_all_alias_types
    a.transpose_(1, 0)
    tmp = a.mul(2)
    return tmp.squeeze(), tmp.transpose(1, 0), a.unsqueeze(0)


@case(lambda: [ones(3, rg=True)])
def outputs_are_aliased(a):
    # test_outputs_are_aliased: a view of another output
    b = a.mul(2)
    c = b.view(-1)
    return b, c


@case(lambda: [ones(3, 3, rg=True)])
def output_aliases_intermediate_multi_output_view(a):
    # test_output_aliases_intermediate_multi_output_view (f1)
    out = torch.mul(a, 3)
    return list(out.unbind(0))


@case(lambda: [ones(3, 3, rg=True)])
def output_aliases_intermediate_multi_output_view_and_base(a):
    # test_output_aliases_intermediate_multi_output_view (f2)
    out = torch.mul(a, 3)
    return *list(out.unbind(0)), out


@case(lambda: [ones(3, 3, rg=True)])
def output_aliases_intermediate_multi_output_view_and_view(a):
    # test_output_aliases_intermediate_multi_output_view (f3)
    out = torch.mul(a, 3)
    return *list(out.unbind(0)), out.view(out.shape)


@case(lambda: [ones(3, 3, rg=True)])
def output_aliases_intermediate_multi_output_view_base_and_view(a):
    # test_output_aliases_intermediate_multi_output_view (f4): intermediate-base logic for all
    out = torch.mul(a, 3)
    return *list(out.unbind(0)), out, out.view(out.shape)


@case(lambda: [ones(4, 6, rg=True)])
def output_aliases_intermediate_split(a):
    out = a * 2
    return list(out.split(2, dim=1))


@case(lambda: [ones(4, 6, rg=True)])
def output_aliases_intermediate_split_and_view(a):
    out = a * 2
    s = out.split(3, dim=1)
    return s[0], s[1], out.view(-1), out.t()


@case(lambda: [ones(3, 3, rg=True)])
def output_and_detach(a):
    # https://github.com/pytorch/pytorch/issues/100348: (out, out.detach())
    out = a * 2
    return out, out.detach()


@case(lambda: [ones(3, 3, rg=True), ones(3, 3)])
def intermediate_no_requires_grad_view(a, b):
    # out.view(-1) of an intermediate that does not require grad, beside a differentiable output
    out = b * 2
    return a * 2, out.view(-1), out.view(-1)


@case(lambda: [ones(4, rg=True)])
def custom_function_view(a):
    # test_input_output_aliase_custom_autograd_function: a custom autograd Function returning
    # its input (autograd wraps it as a view)
    return _IdentityFn.apply(a)


class _IdentityFn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x

    @staticmethod
    def backward(ctx, gx):
        return gx * 0.5


# =================================================================================================
# Mutations hidden from autograd, under no_grad, inference
# =================================================================================================

@case(lambda: [ones(4, rg=True)])
def input_mutation_requires_grad_detach(a):
    # test_input_mutation_requires_grad_detach (leaf input)
    a.detach().mul_(2)
    return a + 3


@case(lambda: [ones(4, rg=True)], keep_input_mutations=True)
def input_mutation_requires_grad_detach_keep(a):
    a.detach().mul_(2)
    return a + 3


@case(lambda: [ones(4, rg=True)], keep_input_mutations=True)
def input_mutation_requires_grad_no_grad(a):
    # test_input_mutation_requires_grad_no_grad
    with torch.no_grad():
        a.mul_(2)
    return a + 3


@case(lambda: [ones(4, rg=True)])
def input_mutation_requires_grad_no_grad_no_keep(a):
    with torch.no_grad():
        a.mul_(2)
    return a + 3


@case(lambda: [ones(4, rg=True)], keep_input_mutations=True)
def input_mutation_requires_grad_no_grad_inference_graph(a):
    # test_input_mutation_requires_grad_no_grad_inference_graph: the whole body under no_grad
    with torch.no_grad():
        a.mul_(2)
        return a + 3


@case(lambda: [nonleaf(4)], keep_input_mutations=True)
def input_mutation_requires_grad_no_grad_detach_mixed(a):
    # test_input_mutation_requires_grad_no_grad_detach_mixed
    a.detach().mul_(2)
    a.mul_(3)
    with torch.no_grad():
        a.mul_(4)
    return a + 5


@case(lambda: [nonleaf(3, 3)], grad_enabled=False)
def inference_mode_input_mutation(a):
    # the analysis itself runs under no_grad (is_train false), input requires grad
    a.mul_(2)
    return a + 1, a.view(-1)


@case(lambda: [ones(3, 3)], keep_input_mutations=True, grad_enabled=False)
def inference_keep_mutation_and_view(a):
    a.mul_(2)
    out = a * 3
    return out, out.view(-1)


@case(lambda: [ones(3, 3), ones(3, 3, rg=True)])
def input_inplace_requires_grad_true(a, b):
    # test_input_inplace_requires_grad_true
    a.requires_grad_(True)
    return a.mul(3), b.mul(4)


@case(lambda: [ones(3, 3, rg=True)])
def grad_mode_mutation(a):
    # the function leaves grad mode off: grad_enabled_mutation (restored after the analysis)
    out = a * 2
    torch.set_grad_enabled(False)
    return out, a + 1


# =================================================================================================
# Aliased and duplicated inputs
# =================================================================================================

def _two_views(idx1, idx2, shape=(4, 2), rg=False):
    def make():
        base = torch.ones(*shape, requires_grad=rg)
        x = base.add(1)
        return [x[idx1], x[idx2]]
    return make


@case(_two_views(0, 0, rg=True))
def input_mutation_aliases_other_input(a, b):
    # test_input_mutation_aliases_other_input
    a.add_(1)
    return a + b


@case(_two_views(0, 0, shape=(2, 2), rg=True))
def input_data_and_metadata_mutation_aliases_other_input(a, b):
    # test_input_data_and_metadata_mutation_aliases_other_input
    a.mul_(2)
    b.t_()
    return a.mul(b)


def _false_alias_inputs():
    base = torch.ones(4, 4, requires_grad=True)
    x = base.add(1)
    return [x[0:2], x[2:4]]


@case(_false_alias_inputs)
def input_mutation_false_aliasing(a, b):
    # test_input_mutation_false_aliasing (inp_callable1, req_grad=True)
    a.mul_(3)
    b.mul_(2)
    return a.clone().view(-1) + b.clone().view(-1)


def _noncontig_input():
    base = torch.ones(2, 2, requires_grad=True)
    x = base.add(1)
    return [x[:, 0]]


@case(_noncontig_input)
def input_mutation_noncontiguous(a):
    # test_input_mutation_noncontiguous
    a.mul_(2)
    return a + 1


def _views_of_one_base():
    base = torch.ones(2, 2, requires_grad=True)
    x = base.mul(2)
    return [x.view(-1), x[0]]


@case(_views_of_one_base)
def output_aliases_multiple_inputs_get_correct_one(a, b):
    # test_output_aliases_multiple_inputs_get_correct_one
    return a.view(a.shape), b.view(b.shape)


def _same_twice():
    x = ones(3, 3, rg=True).clone()
    return [x, x]


@case(_same_twice)
def duplicate_inputs_mutation(a, b):
    a.mul_(2)
    return a + b


@case(_same_twice)
def duplicate_inputs_output_view(a, b):
    return a.view(-1), b * 2


@case(lambda: [ones(3, 3)] * 2, keep_input_mutations=True)
def duplicate_inputs_no_grad_keep(a, b):
    b.add_(1)
    return a * 2


# =================================================================================================
# Storage mutation: set_()
# =================================================================================================

@case(lambda: [ones(3, 3, rg=True)], keep_input_mutations=True)
def set__input_mutation(a):
    # test_input_mutation_set__input_mutation
    b = torch.arange(9, dtype=a.dtype).reshape(3, 3)
    with torch.no_grad():
        a.set_(b)
    return a * b


@case(lambda: [ones(3, 3, rg=True)])
def set__input_mutation_no_keep(a):
    # PyTorch refuses a set_() it cannot keep in the graph: expected {"error": ...}
    b = torch.arange(9, dtype=a.dtype).reshape(3, 3)
    with torch.no_grad():
        a.set_(b)
    return a * b


@case(lambda: [ones(3, 3, rg=True)])
def set__nop(a):
    # test_input_mutation_set__nop
    b = torch.arange(9, dtype=a.dtype)
    a_old = torch.ops.aten.alias.default(a)
    with torch.no_grad():
        a.set_(b)
        a.set_(a_old)
    return a + b.reshape(3, 3)


@case(lambda: [ones(3, 3), ones(3, 3)], keep_input_mutations=True)
def set__and_data_mutation_good(a, b):
    # test_set__and_data_mutation_good (inputs not requiring grad)
    with torch.no_grad():
        a.set_(b)
    b.mul_(2)
    return a + b


# =================================================================================================
# More edge cases (layouts, dtypes, out=, copy_, set_ + aliasing, autograd rebase, grad mode)
# =================================================================================================

@case(lambda: [torch.ones(1, 3, 2, 2).contiguous(memory_format=torch.channels_last).requires_grad_(True)])
def channels_last_output_tangent(a):
    # coerce_tangent_and_suggest_memory_format: the tangent keeps the channels_last format
    return a * 2, (a * 3).sum(dim=1)


@case(lambda: [torch.ones(3, 3, dtype=torch.float64, requires_grad=True).clone()])
def float64_input_mutation_tangent(a):
    a.mul_(2)
    return (a * 3).to(torch.float32)


@case(lambda: [torch.arange(6).view(2, 3)], keep_input_mutations=True)
def int_input_mutation_keep(a):
    a.add_(1)
    return a * 2, a.view(-1)


@case(lambda: [ones(3), ones(3), ones(3)])
def input_mutation_out_variant(a, b, c):
    # (out= ops refuse inputs that require grad, in eager and here)
    torch.add(b, c, out=a)
    return a * 2


@case(lambda: [nonleaf(3, 3), ones(3, 3, rg=True)])
def input_mutation_copy_from_other_input(a, b):
    a.copy_(b)
    return a + 1


@case(lambda: [nonleaf(2, 3)])
def input_metadata_mutation_is_output(a):
    a.unsqueeze_(0)
    return a


@case(lambda: [nonleaf(3, 3)])
def input_mutation_through_returned_view(a):
    v = a.view(-1)
    v.mul_(2)
    return v


@case(lambda: [ones(3), ones(3)], keep_input_mutations=True)
def input_mutation_detached_no_grad_input_keep(a, b):
    a.detach().mul_(2)
    return a + b


@case(lambda: [ones(3, 3, rg=True)])
def detach_view_and_view(a):
    # detach() has no _base: the first output is matched to the second through identical metadata
    out = a * 2
    return out.detach().view(-1), out.view(-1)


@case(lambda: [ones(3, 3, rg=True)])
def two_intermediate_bases(a):
    out1 = a * 2
    out2 = a * 3
    return out1.view(-1), out2.view(-1), out1.t(), out2[0]


@case(lambda: [ones(3, 3, rg=True)])
def intermediate_view_returned_twice(a):
    v = (a * 2).view(-1)
    return v, v


@case(lambda: [ones(3, 3, rg=True)])
def view_of_view_of_intermediate(a):
    out = a * 2
    return out.view(-1).view(3, 3), out.t()[0], out.diagonal()


@case(lambda: [ones(3, 3, rg=True)])
def intermediate_mutated_after_view(a):
    out = a * 2
    v = out.view(-1)
    out.mul_(2)
    return v, out


@case(lambda: [ones(3, 3, rg=True), ones(3, 3)])
def view_then_inplace_makes_base_require_grad(a, b):
    # out does not require grad until mul_(a): the view's autograd meta is rebased
    out = b * 2
    v = out.view(-1)
    out.mul_(a)
    return v


@case(lambda: [ones(3, 3, rg=True)])
def intermediate_made_under_no_grad(a):
    with torch.no_grad():
        out = a * 2
    return out.view(-1), a * 2


@case(lambda: [ones(2, 3, rg=True)])
def reshape_view_and_copy(a):
    out = a * 2
    return a.reshape(-1), out.t().reshape(-1), a.as_strided((2,), (1,)), a.expand(2, 2, 3)


@case(lambda: [ones(4, rg=True)])
def custom_function_clone(a):
    return _CloneFn.apply(a)


class _CloneFn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x.clone()

    @staticmethod
    def backward(ctx, gx):
        return gx


@case(lambda: [ones(3, 3, rg=True)], grad_enabled=False)
def grad_mode_mutation_enable(a):
    # called under no_grad, the function turns grad mode on and leaves it on
    torch.set_grad_enabled(True)
    return a * 2


@case(lambda: [ones(3, 3, rg=True), ones(3, 3)], keep_input_mutations=True)
def set__then_return_input(a, b):
    # after set_(), storages no longer tell that the output is the input
    with torch.no_grad():
        a.set_(b)
    return a, a.view(-1)


@case(lambda: [ones(3, 3, rg=True)], keep_input_mutations=True)
def set__to_intermediate_then_return_input(a):
    # the input's new storage belongs to no input
    b = torch.arange(9, dtype=a.dtype).reshape(3, 3)
    with torch.no_grad():
        a.set_(b)
    return a, b


@case(lambda: [ones(3, 3), ones(3, 3)], keep_input_mutations=True)
def set__other_input_then_view_of_source(a, b):
    # b takes a's storage; the output views a (input 0), not b
    with torch.no_grad():
        b.set_(a)
    return a.view(-1), b * 2


@case(lambda: [ones(3, 3, rg=True)])
def scalar_output_tangent(a):
    return a.sum(), (a * 2).mean(dim=0)


@case(lambda: [nonleaf(3, 3)])
def input_detach_inplace(a):
    # detach_() on an input: it stops requiring grad
    a.detach_()
    return a * 2


@case(lambda: [ones(3, 3)])
def input_resize_same_numel(a):
    a.resize_(9)
    return a * 2


@case(lambda: [nonleaf(1, 2, 3)])
def input_mutation_squeeze_and_swapdims_(a):
    a.squeeze_(0)
    a.swapdims_(0, 1)
    return a + 1


@case(lambda: [nonleaf(3, 3)])
def alias_op_of_input(a):
    return torch.ops.aten.alias.default(a), a.flatten()


def _view_of_no_grad_leaf():
    base = torch.ones(4, 4)
    return [base[1], base[:, 1]]


@case(_view_of_no_grad_leaf)
def views_of_no_grad_base_mutated(a, b):
    a.fill_(2)
    b.zero_()
    return a + b


# =================================================================================================
# Driver
# =================================================================================================

def _to_json(meta) -> dict:
    return {
        "input_info": [
            {
                "is_leaf": bool(i.is_leaf),
                "mutates_data": bool(i.mutates_data),
                "mutates_metadata": bool(i.mutates_metadata),
                "mutations_hidden_from_autograd": bool(i.mutations_hidden_from_autograd),
                "mutations_under_no_grad_or_inference_mode": bool(
                    i.mutations_under_no_grad_or_inference_mode
                ),
                "mutates_storage_metadata": bool(i.mutates_storage_metadata),
                "requires_grad": bool(i.requires_grad),
                "keep_input_mutations": bool(i.keep_input_mutations),
                "mutation_type": i.mutation_type.name,
            }
            for i in meta.input_info
        ],
        "output_info": [
            {
                "output_type": o.output_type.name,
                "base_idx": o.base_idx,
                "requires_grad": bool(o.requires_grad),
            }
            for o in meta.output_info
        ],
        "num_intermediate_bases": int(meta.num_intermediate_bases),
        "keep_input_mutations": bool(meta.keep_input_mutations),
        "traced_tangents": [
            {"shape": [int(s) for s in t.shape], "dtype": str(t.dtype)}
            for t in meta.traced_tangents
        ],
    }


def _derived(meta) -> dict:
    return {
        "mutated_inp_runtime_indices": list(meta.mutated_inp_runtime_indices),
        "mutated_graph_handled_indices": list(meta.mutated_graph_handled_indices),
        "mutated_graph_handled_indices_seen_by_autograd": list(
            meta.mutated_graph_handled_indices_seen_by_autograd
        ),
        "aliased_out_indices": list(meta.aliased_out_indices),
        "unsafe_view_out_indices": list(meta.unsafe_view_out_indices),
        "num_outputs": meta.num_outputs,
        "num_outputs_non_aliased": meta.num_outputs_non_aliased,
        "num_outputs_aliased_to_inputs": meta.num_outputs_aliased_to_inputs,
        "num_unsafe_view_outputs": meta.num_unsafe_view_outputs,
        "num_outputs_aliased_to_intermediates": meta.num_outputs_aliased_to_intermediates,
        "num_outputs_aliased": meta.num_outputs_aliased,
        "num_forward_returns": meta.num_forward_returns,
        "num_forward": meta.num_forward,
        "is_train": bool(meta.is_train),
        "grad_enabled_mutation": meta.grad_enabled_mutation,
        "traced_tangent_strides": [list(t.stride()) for t in meta.traced_tangents],
    }


def run_case(c: Case, derived: bool = False) -> dict:
    torch.manual_seed(0)
    args = c.make_inputs()
    fake_mode = FakeTensorMode()
    # One converter memo for all inputs: duplicated and aliased inputs stay so on the fake side.
    fake_args = [fake_mode.from_tensor(a) if isinstance(a, torch.Tensor) else a for a in args]
    with torch.set_grad_enabled(c.grad_enabled):
        is_train = torch.is_grad_enabled() and any(
            isinstance(a, torch.Tensor) and a.requires_grad for a in fake_args
        )

        def flat_fn(*xs):
            out = c.fn(*xs)
            if isinstance(out, torch.Tensor):
                return [out]
            return list(out)

        try:
            with fake_mode:
                meta = run_functionalized_fw_and_collect_metadata(
                    flat_fn,
                    flat_args_descs=[PlainAOTInput(i) for i in range(len(fake_args))],
                    keep_input_mutations=c.keep_input_mutations,
                    is_train=is_train,
                )(*fake_args)
            out = _to_json(meta)
            if derived:
                out["derived"] = _derived(meta)
            return out
        except Exception as e:  # PyTorch refuses the program
            return {"error": f"{type(e).__name__}: {e}".strip()}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--case", action="append", default=[], help="run only this case (repeatable)")
    p.add_argument("--list", action="store_true", help="print the case names, one a line")
    p.add_argument("--derived", action="store_true", help="add a \"derived\" object to each case")
    p.add_argument("--indent", type=int, default=None)
    ns = p.parse_args(argv)
    if ns.list:
        print("\n".join(CASES))
        return 0
    names = ns.case or list(CASES)
    unknown = [n for n in names if n not in CASES]
    if unknown:
        print(f"unknown case(s): {', '.join(unknown)}", file=sys.stderr)
        return 2
    warnings.simplefilter("ignore")
    result = {n: run_case(CASES[n], ns.derived) for n in names}
    json.dump(result, sys.stdout, indent=ns.indent)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
