#!/usr/bin/env python3
"""Batch compile throughput: `aotpipe compile` on the example corpus at -j1 and -j2, and the same
programs through Python AOTAutograd (functorch.compile.aot_function with nop compilers), run
sequentially and on a Python thread pool of 2, all in one run. Prints one table.

    bench/cli/batch_throughput.py [--aotpipe build/tools/aotpipe] [--repeat 3]

What is timed:
  aotpipe  `aotpipe compile examples/ -j N --no-svg`: the batch wall time its Summary reports
           (metadata, dedupe, synthetic base, joint trace, partition, interpreter "compile" of every
           graph; not process start-up nor the report), best of --repeat; the whole process time
           is printed below the table.
  Python   per program: the first call of aot_function(fn, nop, nop) minus a second call, i.e. the
           compile alone (the first call also runs the compiled forward once); best of --repeat for
           the whole corpus. The pool variants submit every program's first call to a
           ThreadPoolExecutor(2) (AOTAutograd's FX tracing keeps global state: it may fail, which
           the table reports) and to a ProcessPoolExecutor(2) (worker start-up and torch import
           included), and time the batch.
"""
import argparse
import concurrent.futures
import multiprocessing
import pathlib
import re
import sys
import time

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parent.parent
sys.path.insert(0, str(ROOT / "examples"))

import torch  # noqa: E402
from functorch.compile import nop  # noqa: E402

import generate  # noqa: E402
from aotpipe_runs import best_batch_run  # noqa: E402


def aotpipe_batch(exe, jobs, repeat):
    """(graphs, batch seconds as the Summary reports them, whole process seconds), best of repeat."""
    graphs, batch, process, _ = best_batch_run(
        [exe, "compile", str(ROOT / "examples"), "-j", str(jobs), "--no-svg", "--no-cache"], repeat)
    return graphs, batch, process


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


def first_call(name):
    p = generate.get(name)
    compiled = generate.python_aot_function(p, fw_compiler=nop, bw_compiler=nop)
    compiled(*p.make_inputs())


def spawn_process_pool(workers):
    # spawn, not fork: autograd's threads do not survive fork.
    return concurrent.futures.ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn"))


def python_pool(programs, repeat, executor, workers=2):
    """Wall time of the batch on a pool (first calls); None and the error when it fails."""
    best = None
    for _ in range(repeat):
        start = time.perf_counter()
        try:
            with executor(workers) as pool:
                list(pool.map(first_call, [p.name for p in programs]))
        except Exception as e:  # noqa: BLE001 - reported in the table
            return None, f"{type(e).__name__}: {e}"
        wall = time.perf_counter() - start
        best = wall if best is None else min(best, wall)
    return best, None


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--aotpipe", default=str(ROOT / "build" / "tools" / "aotpipe"))
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    torch.set_num_threads(1)
    programs = generate.programs()

    rows = []
    processes = []
    for jobs in (1, 2):
        graphs, wall, process = aotpipe_batch(args.aotpipe, jobs, args.repeat)
        rows.append((f"aotpipe compile -j{jobs}", graphs, wall))
        processes.append(f"aotpipe compile -j{jobs}: {process:.2f} s for the whole process "
                         "(start-up, loading libtorch, reading files, report)")
    rows.append(("Python aot_function, sequential", len(programs), python_sequential(programs, args.repeat)))
    failures = []
    for label, executor in (("2 threads", concurrent.futures.ThreadPoolExecutor),
                            ("2 processes", spawn_process_pool)):
        wall, error = python_pool(programs, args.repeat, executor)
        rows.append((f"Python aot_function, {label}", len(programs), wall))
        if error:
            failures.append(f"Python aot_function, {label}: failed: {error}")

    anchor = rows[2][1] / rows[2][2]
    print(f"{'':34} {'graphs':>7} {'wall s':>8} {'graphs/s':>9} {'vs Python seq':>14}")
    for name, graphs, wall in rows:
        if wall is None:
            print(f"{name:34} {graphs:>7} {'failed':>8}")
            continue
        rate = graphs / wall
        print(f"{name:34} {graphs:>7} {wall:>8.2f} {rate:>9.1f} {rate / anchor:>13.1f}x")
    for line in failures:
        print(line.splitlines()[0])
    for line in processes:
        print(line)
    print(f"\ntorch {torch.__version__}, {len(programs)} programs, best of {args.repeat}")


if __name__ == "__main__":
    main()
