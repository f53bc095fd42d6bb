#!/usr/bin/env python3
"""aotpipe against PyTorch's AOTAutograd, in one run, one table.

    source ~/.cache/aotpipe/env.sh
    $AOTPIPE_PYTHON bench/runtime/compile_vs_python.py [--build-dir build] [--repeat 3]

C++ side: the aot_compile_bench program of the build folder (Google Benchmark, medians of
--repeat repetitions). Python side, in this process, with the installed torch:
  compile  functorch.compile.aot_function(program, nop, nop, partition_fn=min-cut) on the same
           synthetic program (synthetic_program.h: a chain of mm, sin, mul, add on two 16x16
           inputs that require grad) of 10 ... 2000 ops: the time of the FIRST call, which traces
           the joint graph, partitions it, "compiles" with nop and runs the forward once (the
           forward of these programs takes well under 1% of it: the steady call column says how
           long). Median of --repeat fresh aot_function objects, after one warm-up compile.
  calls    x.sin() on a 1-element tensor, eager and through aot_function(nop), with and without
           requires_grad; median per call of 5 timeit rounds.
The ratio column is Python / C++ (above 1: aotpipe is faster).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
import timeit
import warnings

import torch
from functorch.compile import aot_function, min_cut_rematerialization_partition, nop

SIZES = (10, 100, 500, 1000, 2000)
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def synthetic_program(num_ops: int):
    def program(x, w):  # op for op the same as synthetic_program.h
        for i in range(num_ops):
            r = i % 4
            if r == 0:
                x = torch.mm(x, w)
            elif r == 1:
                x = x.sin()
            elif r == 2:
                x = x * w
            else:
                x = x + 0.5
        return x
    return program


def synthetic_inputs():
    return torch.randn(16, 16).requires_grad_(True), (torch.randn(16, 16) * 0.25).requires_grad_(True)


def python_compile_ms(num_ops: int, repeat: int) -> tuple[float, float]:
    """Median first-call time (compile) and the median of later calls, in ms."""
    program = synthetic_program(num_ops)
    first, steady = [], []
    for _ in range(repeat):
        f = aot_function(program, fw_compiler=nop, bw_compiler=nop,
                         partition_fn=min_cut_rematerialization_partition)
        x, w = synthetic_inputs()
        t0 = time.perf_counter()
        f(x, w)
        first.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        f(x, w)
        steady.append(time.perf_counter() - t0)
    return statistics.median(first) * 1e3, statistics.median(steady) * 1e3


def python_call_us(fn, x) -> float:
    number = 20000
    rounds = timeit.repeat(lambda: fn(x), number=number, repeat=5)
    return statistics.median(rounds) / number * 1e6


def tiny_sin(x):
    return x.sin()


def run_cpp(binary: str, repeat: int, benchmark_filter: str) -> dict[str, float]:
    """{run name: median real time in the benchmark's unit} from aot_compile_bench."""
    cmd = [binary, "--benchmark_format=json", f"--benchmark_repetitions={repeat}",
           "--benchmark_report_aggregates_only=true", f"--benchmark_filter={benchmark_filter}"]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    medians = {}
    for b in json.loads(out)["benchmarks"]:
        if b.get("aggregate_name") == "median":
            medians[b["run_name"]] = b["real_time"]
    return medians


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build-dir", default=os.path.join(REPO, "build"))
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--sizes", type=int, nargs="+", default=list(SIZES),
                    help="program sizes in ops (each must be one of aot_compile_bench's)")
    ns = ap.parse_args()
    binary = os.path.join(ns.build_dir, "bench", "runtime", "aot_compile_bench")
    if not os.access(binary, os.X_OK):
        print(f"no benchmark program at {binary}: build it with `ninja -C {ns.build_dir} aot_compile_bench`",
              file=sys.stderr)
        return 2
    warnings.simplefilter("ignore")

    print(f"running {binary} ...", file=sys.stderr)
    sizes = "|".join(str(n) for n in ns.sizes)
    cpp = run_cpp(binary, ns.repeat, f"BM_Compile/ops:({sizes})$|Call")

    print("running PyTorch's aot_function ...", file=sys.stderr)
    python_compile_ms(10, 1)  # warm-up: first use of the tracer, the partitioner and the dispatcher
    rows = []
    for n in ns.sizes:
        py_ms, py_steady_ms = python_compile_ms(n, ns.repeat)
        rows.append((f"compile, {n} ops (ms)", cpp[f"BM_Compile/ops:{n}"], py_ms,
                     f"steady call {py_steady_ms:.2f} ms"))
    for rg in (0, 1):
        x = torch.randn(1).requires_grad_(bool(rg))
        compiled = aot_function(tiny_sin, fw_compiler=nop, bw_compiler=nop)
        compiled(x)
        eager_us, compiled_us = python_call_us(tiny_sin, x), python_call_us(compiled, x)
        cpp_eager, cpp_compiled = cpp[f"BM_EagerCall/requires_grad:{rg}"], cpp[f"BM_CompiledCall/requires_grad:{rg}"]
        rows.append((f"x.sin() eager call, requires_grad={rg} (us)", cpp_eager, eager_us, ""))
        rows.append((f"x.sin() compiled call, requires_grad={rg} (us)", cpp_compiled, compiled_us, ""))
        rows.append((f"  overhead over eager, requires_grad={rg} (us)", cpp_compiled - cpp_eager,
                     compiled_us - eager_us, ""))

    print(f"torch {torch.__version__}, {torch.get_num_threads()} intra-op threads; "
          f"medians of {ns.repeat} repetitions")
    print(f"| {'measure':50s} | {'aotpipe C++':>12s} | {'PyTorch Python':>14s} | {'Python/C++':>10s} | note")
    print(f"|{'-' * 52}|{'-' * 14}|{'-' * 16}|{'-' * 12}|------")
    for name, c, p, note in rows:
        ratio = f"{p / c:10.1f}" if c > 0 else f"{'-':>10s}"
        print(f"| {name:50s} | {c:12.2f} | {p:14.2f} | {ratio} | {note}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
