#!/usr/bin/env python3
"""Batch compile scaling: `aotpipe compile` on the example corpus repeated K times (symlinked
copies, so K x 91 graph files), with -j 1, 2, 4, ... worker threads in one process and under
`mpirun -n 1/2/4 ... -j 1`, all in one run. Prints one table: graphs/s (the batch wall time the
Summary reports; for MPI, rank 0's from start to the merged report), the whole process time, and
the speedup over -j 1. The compile cache is off (--no-cache): every graph is compiled. The MPI
runs' --out files are compared with the single-process run's (they must be identical).

    bench/cli/scaling.py [--aotpipe build/tools/aotpipe] [--copies 8] [--jobs 1,2] [--ranks 1,2,4]
                         [--repeat 3]

One intra-op thread (OMP_NUM_THREADS=1), so -j and the ranks are the only parallelism. On a
machine with fewer cores than ranks x jobs, mpirun runs with --oversubscribe.

Two more tables, side by side in the same run:
- in-process against processes: for each N of --jobs, one process with -j N compiling every copy
  against N independent processes (no MPI) with -j 1, each compiling its share of the copies, all
  started together. Rates are graphs per second of batch time (the Summary's wall, which leaves
  out loading libtorch); the processes' batch time is the slowest one's. The ratio in-process /
  processes is what one process loses to contention inside it (allocator, locks, shared counts).
- weights (--weights 1,6,12): GPT-2 small at 1, 6 and 12 layers (bench/package/export_gpt2.py,
  exported once into ~/.cache/aotpipe/bench/): archive size, bytes the process read through read
  calls (/proc/PID/io rchar, sampled), peak resident memory and wall time of `aotpipe compile
  X.pt2 -j1 --no-cache`, median of --repeat runs. A compile reads no weight byte: these stay flat.
"""
import argparse
import filecmp
import os
import pathlib
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

from aotpipe_runs import batch_summary, best_batch_run as run

ROOT = pathlib.Path(__file__).resolve().parent.parent.parent


def same_tree(a, b):
    """True when the two folders hold the same files with the same bytes."""
    cmp = filecmp.dircmp(a, b)
    if cmp.left_only or cmp.right_only or cmp.funny_files:
        return False
    _, mismatch, errors = filecmp.cmpfiles(a, b, cmp.common_files, shallow=False)
    return not mismatch and not errors and all(same_tree(a / d, b / d) for d in cmp.common_dirs)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--aotpipe", default=str(ROOT / "build/tools/aotpipe"))
    parser.add_argument("--copies", type=int, default=8)
    parser.add_argument("--jobs", default="1,2")
    parser.add_argument("--ranks", default="1,2,4")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--weights", default="", help="GPT-2 layer counts for the weights table, e.g. 1,6,12")
    args = parser.parse_args()
    if args.weights:
        weights_table(args.aotpipe, [int(x) for x in args.weights.split(",")], args.repeat)
    if not args.jobs:  # --jobs "": the weights table alone
        return
    with tempfile.TemporaryDirectory(prefix="aotpipe-scaling-") as tmp:
        tmp = pathlib.Path(tmp)
        corpus = tmp / "corpus"
        corpus.mkdir()
        for k in range(args.copies):
            (corpus / f"copy{k}").symlink_to(ROOT / "examples", target_is_directory=True)
        base = [args.aotpipe, "compile", str(corpus), "--no-svg", "--no-cache"]
        rows = []
        process_rows = []
        for j in [int(x) for x in args.jobs.split(",")]:
            graphs, batch, process, _ = run(base + ["-j", str(j)], args.repeat)
            rows.append((f"1 process, -j {j}", j, graphs, batch, process, ""))
            if args.copies % j == 0:  # the same copies, split evenly among j processes
                shares = []
                for p in range(j):
                    share = tmp / f"share{j}_{p}"
                    share.mkdir()
                    for k in range(p * args.copies // j, (p + 1) * args.copies // j):
                        (share / f"copy{k}").symlink_to(ROOT / "examples", target_is_directory=True)
                    shares.append(share)
                process_rows.append((j, graphs / batch, processes_rate(args.aotpipe, shares, args.repeat)))
        mpirun = shutil.which("mpirun")
        if mpirun and args.ranks:
            single = tmp / "single"
            run(base + ["-j", "1", "--out", str(single)], 1)
            for n in [int(x) for x in args.ranks.split(",")]:
                cmd = [mpirun, "--oversubscribe", "-n", str(n)] if n > 1 else []
                if n > 1 and os.geteuid() == 0:
                    cmd.insert(1, "--allow-run-as-root")
                graphs, batch, process, _ = run(cmd + base + ["-j", "1"], args.repeat)
                out = tmp / f"ranks{n}"
                run(cmd + base + ["-j", "1", "--out", str(out)], 1)
                rows.append((f"mpirun -n {n}, -j 1", n, graphs, batch, process,
                             "identical" if same_tree(out, single) else "DIFFERENT"))
                shutil.rmtree(out)
        elif args.ranks:
            print("(no mpirun on this machine: MPI rows left out)")
    base_rate = rows[0][2] / rows[0][3]
    print(f"{'run':<22} {'workers':>7} {'graphs':>7} {'batch s':>8} {'graphs/s':>9} {'speedup':>8} "
          f"{'process s':>9}  outputs vs 1 process")
    for name, workers, graphs, batch, process, same in rows:
        rate = graphs / batch
        print(f"{name:<22} {workers:>7} {graphs:>7} {batch:>8.3f} {rate:>9.1f} {rate / base_rate:>7.2f}x "
              f"{process:>9.2f}  {same}")
    print(f"\n{os.cpu_count()} cores; best of {args.repeat}; OMP_NUM_THREADS=1; --no-cache")
    if process_rows:
        print(f"\n{'N':>3} {'in-process graphs/s':>20} {'N processes graphs/s':>21} {'in-process / processes':>23}")
        for n, inside, apart in process_rows:
            print(f"{n:>3} {inside:>20.1f} {apart:>21.1f} {inside / apart:>22.2f}x")
        print(f"(graphs per second of batch time; the processes' batch time is the slowest one's; best of {args.repeat})")


def processes_rate(aotpipe, corpus_dirs, repeat):
    """N processes (one per folder of `corpus_dirs`), -j 1 each, started together: total graphs
    per second of the slowest one's batch time, best of `repeat`."""
    best = 0.0
    for _ in range(repeat):
        procs = [subprocess.Popen([aotpipe, "compile", str(d), "--no-svg", "--no-cache", "-j", "1"],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                  env={**os.environ, "OMP_NUM_THREADS": "1"}) for d in corpus_dirs]
        graphs, slowest = 0, 0.0
        for p in procs:
            out, err = p.communicate()
            if p.returncode != 0:
                sys.exit(f"aotpipe compile failed:\n{out[-3000:]}\n{err[-3000:]}")
            done, batch = batch_summary(out)
            graphs += done
            slowest = max(slowest, batch)
        best = max(best, graphs / slowest)
    return best


def sampled_run(cmd):
    """(wall seconds, peak resident kB, rchar bytes sampled from /proc/PID/io) of one run. This
    script imports no torch, so the fork before exec adds little to the child's peak."""
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            env={**os.environ, "OMP_NUM_THREADS": "1"})
    rchar = 0
    while True:
        try:
            with open(f"/proc/{proc.pid}/io") as f:
                rchar = max(rchar, int(next(line for line in f if line.startswith("rchar:")).split()[1]))
        except (OSError, StopIteration, ValueError):
            pass
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid == proc.pid:
            break
        time.sleep(0.002)
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(f"{' '.join(cmd)} failed")
    return time.perf_counter() - start, usage.ru_maxrss, rchar


def weights_table(aotpipe, layer_counts, repeat):
    cache = pathlib.Path.home() / ".cache" / "aotpipe" / "bench"
    cache.mkdir(parents=True, exist_ok=True)
    python = os.environ.get("AOTPIPE_PYTHON", sys.executable)
    print(f"{'archive':<16} {'MB':>7} {'read MB':>8} {'peak RSS MB':>12} {'compile s':>10}")
    for layers in layer_counts:
        archive = cache / f"gpt2_small_{layers}l.pt2"
        if not archive.exists():
            subprocess.run([python, str(ROOT / "bench/package/export_gpt2.py"), str(archive), "--layers", str(layers)],
                           check=True)
        walls, peaks, reads = [], [], []
        for _ in range(repeat):
            wall, peak_kb, rchar = sampled_run([aotpipe, "compile", str(archive), "-j1", "--no-cache"])
            walls.append(wall)
            peaks.append(peak_kb)
            reads.append(rchar)
        print(f"{archive.name:<16} {archive.stat().st_size / 1e6:>7.0f} {statistics.median(reads) / 1e6:>8.1f} "
              f"{statistics.median(peaks) / 1024:>12.0f} {statistics.median(walls):>10.2f}")
    print(f"(aotpipe compile X -j1 --no-cache; medians of {repeat}; read MB: rchar of /proc/PID/io, sampled "
          f"every 2 ms, so the last reads may be missed)\n")


if __name__ == "__main__":
    main()
