#!/usr/bin/env python3
"""Loading and compiling torch.export archives: aotpipe (C++) against PyTorch (Python), one table.

    source ~/.cache/aotpipe/env.sh
    $AOTPIPE_PYTHON bench/export/pt2_vs_python.py [--build-dir build] [--repeat 7] [ARCHIVE...]

Archives: examples/pt2/*.pt2 by default. Every column is a median of --repeat runs after one
warm-up, in this one process (Python) and one run of build/bench/export/pt2_import_bench (C++):
  py load      torch.export.load(archive)
  py decomp    ep.run_decompositions() of the loaded program (what turns the training IR into
               functional core ATen; for a core-ATen archive it has little left to do)
  py aot       functorch.compile.aot_module(ep.module(), nop, nop, partition_fn=min-cut) on the
               sample inputs: the first call, which traces the joint forward+backward,
               partitions and runs the forward once ("error" where PyTorch cannot: see below)
  c++ load     aotpipe::load_exported_program(archive)
  c++ compile  aotpipe::compile of its flat program on its state and sample inputs (training)
  load x       py load / c++ load;  compile x  (py decomp + py aot) / c++ compile
The C++ compile does both Python steps' work (functionalize and decompose, then the joint and
partition). Python's aot_module of a core-ATen program with BatchNorm fails as its ep.module()
backward does (a buffer written after _native_batch_norm_legit_functional saved it).
"""
from __future__ import annotations

import argparse
import glob
import json
import os
import statistics
import subprocess
import sys
import time
import warnings

import torch
from functorch.compile import aot_module, min_cut_rematerialization_partition, nop

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def median_ms(fn, repeat):
    fn()  # warm-up
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times)


def python_side(path, repeat):
    row = {"py load": median_ms(lambda: torch.export.load(path), repeat)}
    ep = torch.export.load(path)
    row["py decomp"] = median_ms(lambda: ep.run_decompositions(), repeat)
    args, kwargs = ep.example_inputs

    def aot_first_call():
        compiled = aot_module(ep.module(), fw_compiler=nop, bw_compiler=nop,
                              partition_fn=min_cut_rematerialization_partition)
        compiled(*args, **kwargs)

    try:
        row["py aot"] = median_ms(aot_first_call, repeat)
    except Exception as e:  # noqa: BLE001 - reported in the table
        row["py aot"] = None
        row["py aot error"] = str(e).splitlines()[0][:80]
    return row


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build-dir", default=os.path.join(REPO, "build"))
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("archives", nargs="*")
    opts = ap.parse_args()
    warnings.filterwarnings("ignore")
    torch.set_num_threads(1)
    archives = opts.archives or sorted(glob.glob(os.path.join(REPO, "examples", "pt2", "*.pt2")))
    exe = os.path.join(opts.build_dir, "bench", "export", "pt2_import_bench")
    cpp = {}
    out = subprocess.run([exe, "--repeat", str(opts.repeat), *archives], check=True, capture_output=True, text=True,
                         env={**os.environ, "OMP_NUM_THREADS": "1"})
    for line in out.stdout.splitlines():
        r = json.loads(line)
        cpp[r["archive"]] = r

    header = f"{'archive':<28} {'fw/bw ops':>9} {'py load':>8} {'c++ load':>8} {'load x':>7} " \
             f"{'py decomp':>9} {'py aot':>8} {'c++ compile':>11} {'compile x':>9}"
    print(header)
    print("-" * len(header))
    for path in archives:
        py = python_side(path, opts.repeat)
        c = cpp[path]
        name = os.path.basename(path)
        load_x = py["py load"] / c["load_ms"]
        aot = py["py aot"]
        compile_x = f"{(py['py decomp'] + aot) / c['compile_ms']:.1f}" if aot is not None else "-"
        aot_text = f"{aot:.2f}" if aot is not None else "error"
        ops = f"{c['ops_forward']}/{c['ops_backward']}"
        print(f"{name:<28} {ops:>9} {py['py load']:8.2f} {c['load_ms']:8.2f} "
              f"{load_x:7.1f} {py['py decomp']:9.2f} {aot_text:>8} "
              f"{c['compile_ms']:11.2f} {compile_x:>9}")
        if aot is None:
            print(f"    py aot error: {py['py aot error']}")
    print("(ms, medians of", opts.repeat, "runs; one intra-op thread on both sides)")


if __name__ == "__main__":
    sys.exit(main())
