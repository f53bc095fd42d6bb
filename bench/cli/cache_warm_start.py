#!/usr/bin/env python3
"""Cold vs warm `aotpipe compile` of the example corpus, and cold vs warm compiles in process
(`compile_cache_bench`: the corpus through the C++ API, and aot_function's first call), in one run.
Prints two tables.

    bench/cli/cache_warm_start.py [--aotpipe build/tools/aotpipe]
                                  [--cache-bench build/bench/runtime/compile_cache_bench] [--rounds 7]

What is timed, per round (a fresh cache folder each round):
  cold   `aotpipe compile examples -j2 --no-svg --cache-dir DIR` into the empty folder: every graph
         compiled, its entry and file record stored
  warm   the same command again: every graph found by its file's record (cache.md)
Each command's batch time (its Summary's wall time: loading, compiling or loading from the cache,
and the report; not process start-up) and its whole process time (start-up included); medians
over the rounds, cold and warm alternating.
"""
import argparse
import os
import pathlib
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent.parent


def run(cmd):
    start = time.perf_counter()
    out = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, "OMP_NUM_THREADS": "1"})
    process = time.perf_counter() - start
    if out.returncode != 0:
        sys.exit(f"{' '.join(map(str, cmd))} failed:\n{out.stdout[-3000:]}\n{out.stderr[-3000:]}")
    summary = out.stdout.split("\nSummary\n", 1)[1].splitlines()
    graphs, batch = int(summary[1].split()[0]), float(summary[1].split()[3])
    cache_line = next(line for line in summary if "compile cache:" in line).strip()
    return graphs, batch, process, cache_line


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--aotpipe", default=str(ROOT / "build/tools/aotpipe"))
    parser.add_argument("--cache-bench", default=str(ROOT / "build/bench/runtime/compile_cache_bench"))
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()

    times = {"cold": ([], []), "warm": ([], [])}
    lines = {}
    graphs = 0
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(args.rounds):
            cache = pathlib.Path(tmp) / "cache"
            shutil.rmtree(cache, ignore_errors=True)
            cmd = [args.aotpipe, "compile", str(ROOT / "examples"), "-j2", "--no-svg", "--cache-dir", str(cache)]
            for phase in ("cold", "warm"):
                graphs, batch, process, lines[phase] = run(cmd)
                times[phase][0].append(batch)
                times[phase][1].append(process)

    med = {phase: (statistics.median(b), statistics.median(p)) for phase, (b, p) in times.items()}
    print(f"aotpipe compile examples -j2 --no-svg: {graphs} graphs, median of {args.rounds} rounds\n")
    print(f"{'':8}{'batch ms':>12}{'process ms':>14}   cache")
    for phase in ("cold", "warm"):
        print(f"{phase:8}{med[phase][0] * 1e3:12.1f}{med[phase][1] * 1e3:14.1f}   {lines[phase]}")
    print(f"{'cold/warm':8}{med['cold'][0] / med['warm'][0]:11.1f}x{med['cold'][1] / med['warm'][1]:13.2f}x")
    print(f"  (batch: the Summary's wall time; process: the whole command, libtorch's start-up included;")
    print(f"   batch cold/warm per round: "
          f"{', '.join(f'{c / w:.1f}x' for c, w in zip(times['cold'][0], times['warm'][0]))})\n")
    sys.stdout.flush()
    subprocess.run([args.cache_bench, "--repeats", "7"], check=True)


if __name__ == "__main__":
    main()
