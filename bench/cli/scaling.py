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
"""
import argparse
import filecmp
import os
import pathlib
import shutil
import tempfile

from aotpipe_runs import best_batch_run as run

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
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="aotpipe-scaling-") as tmp:
        tmp = pathlib.Path(tmp)
        corpus = tmp / "corpus"
        corpus.mkdir()
        for k in range(args.copies):
            (corpus / f"copy{k}").symlink_to(ROOT / "examples", target_is_directory=True)
        base = [args.aotpipe, "compile", str(corpus), "--no-svg", "--no-cache"]
        rows = []
        for j in [int(x) for x in args.jobs.split(",")]:
            graphs, batch, process, _ = run(base + ["-j", str(j)], args.repeat)
            rows.append((f"1 process, -j {j}", j, graphs, batch, process, ""))
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


if __name__ == "__main__":
    main()
