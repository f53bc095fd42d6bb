#!/usr/bin/env python3
"""Batch compile throughput: `aotpipe compile` on the example corpus at -j1 and -j2, and the same
programs through Python AOTAutograd (functorch.compile.aot_function with nop compilers), run
sequentially and on a Python thread pool of 2, all in one run. Prints one table.

    bench/cli/batch_throughput.py [--aotpipe build/tools/aotpipe] [--repeat 3]

What is timed:
  aotpipe  the whole `aotpipe compile examples/ -j N --no-svg` process wall time (parsing, metadata,
           dedupe, synthetic base, joint trace, partition, interpreter "compile"), best of --repeat.
  Python   per program: the first call of aot_function(fn, nop, nop) minus a second call, i.e. the
           compile alone (the first call also runs the compiled forward once); best of --repeat for
           the whole corpus. The thread pool variant submits every program to a
           ThreadPoolExecutor(2) and times the batch (first calls only; the GIL serializes most of it).
"""
import argparse
import concurrent.futures
import pathlib
import re
import subprocess
import sys
import time

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parent.parent
sys.path.insert(0, str(ROOT / "examples"))

import torch  # noqa: E402
from functorch.compile import nop  # noqa: E402

import generate  # noqa: E402


def aotpipe_batch(exe, jobs, repeat):
    best = None
    for _ in range(repeat):
        start = time.perf_counter()
        out = subprocess.run([exe, "compile", str(ROOT / "examples"), "-j", str(jobs), "--no-svg"],
                             capture_output=True, text=True)
        wall = time.perf_counter() - start
        if out.returncode != 0:
            sys.exit(f"aotpipe compile -j {jobs} failed:\n{out.stdout[-3000:]}\n{out.stderr[-3000:]}")
        best = wall if best is None else min(best, wall)
    graphs = len(list((ROOT / "examples").glob("*.aotg")))
    return graphs, best


def python_compile_one(p):
    """Seconds of compile alone for one program (first call minus a steady-state call)."""
    compiled = generate.python_aot_function(p, fw_compiler=nop, bw_compiler=nop)
    args = p.make_inputs()
    start = time.perf_counter()
    compiled(*args)
    first = time.perf_counter() - start
    args = p.make_inputs()
    start = time.perf_counter()
    compiled(*args)
    second = time.perf_counter() - start
    return max(first - second, 0.0)


def python_sequential(programs, repeat):
    best = None
    for _ in range(repeat):
        total = sum(python_compile_one(p) for p in programs)
        best = total if best is None else min(best, total)
    return best


def python_thread_pool(programs, repeat, workers=2):
    def first_call(p):
        compiled = generate.python_aot_function(p, fw_compiler=nop, bw_compiler=nop)
        compiled(*p.make_inputs())

    best = None
    for _ in range(repeat):
        start = time.perf_counter()
        with concurrent.futures.ThreadPoolExecutor(workers) as pool:
            list(pool.map(first_call, programs))
        wall = time.perf_counter() - start
        best = wall if best is None else min(best, wall)
    return best


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--aotpipe", default=str(ROOT / "build" / "tools" / "aotpipe"))
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    torch.set_num_threads(1)
    programs = generate.programs()

    rows = []
    for jobs in (1, 2):
        graphs, wall = aotpipe_batch(args.aotpipe, jobs, args.repeat)
        rows.append((f"aotpipe compile -j{jobs}", graphs, wall))
    rows.append(("Python aot_function, sequential", len(programs), python_sequential(programs, args.repeat)))
    rows.append(("Python aot_function, 2 threads", len(programs), python_thread_pool(programs, args.repeat)))

    anchor = rows[2][1] / rows[2][2]
    print(f"{'':34} {'graphs':>7} {'wall s':>8} {'graphs/s':>9} {'vs Python seq':>14}")
    for name, graphs, wall in rows:
        rate = graphs / wall
        print(f"{name:34} {graphs:>7} {wall:>8.2f} {rate:>9.1f} {rate / anchor:>13.1f}x")
    print(f"\ntorch {torch.__version__}, {len(programs)} programs, best of {args.repeat}")


if __name__ == "__main__":
    main()
