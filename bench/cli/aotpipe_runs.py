"""Running `aotpipe compile` for the bench scripts of this folder."""
import os
import subprocess
import sys
import time


def batch_summary(stdout):
    """(graphs, batch seconds) from an `aotpipe compile` report's Summary line:
    graphs ok failed wall-s graphs/s ..."""
    summary = stdout.split("\nSummary\n", 1)[1].splitlines()[1].split()
    return int(summary[0]), float(summary[3])


def best_batch_run(cmd, repeat):
    """Runs `cmd` (an `aotpipe compile ...` command line) `repeat` times with one intra-op thread
    (OMP_NUM_THREADS=1: the workers are the only parallelism) and returns, for the run whose
    Summary reports the shortest batch time: (graphs, batch seconds, whole process seconds,
    stdout). Exits naming the command when a run fails."""
    best = None
    for _ in range(repeat):
        start = time.perf_counter()
        out = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, "OMP_NUM_THREADS": "1"})
        process = time.perf_counter() - start
        if out.returncode != 0:
            sys.exit(f"{' '.join(cmd)} failed:\n{out.stdout[-3000:]}\n{out.stderr[-3000:]}")
        graphs, batch = batch_summary(out.stdout)
        if best is None or batch < best[1]:
            best = (graphs, batch, process, out.stdout)
    return best
