#!/usr/bin/env python3
"""Where a batch compile's time goes, per stage, from `aotpipe compile --trace` files: one table
with, for each trace, the total time spent in each stage (summed over every job and thread) and
its share of the threads' wall time; with two or more traces, each stage's total against the
first trace's. Run on a -j1 and a -j16 trace of the same corpus, a stage whose total grows with
the threads is where the threads contend (the allocator, a lock, a shared count); time outside
every stage (reading files, reports, the pool's hand-offs) shows as "outside stages".

    bench/cli/trace_stages.py trace-j1.json trace-j16.json

build-cuda-bundle/run-checks writes such a pair on the GPU machine (compile_j1, compile_j16).
"""
import json
import sys
from collections import defaultdict


def stage_totals(path):
    """Per stage, the summed duration in ms; and the threads' wall time in ms (per thread, first
    event's start to last event's end, summed)."""
    with open(path) as f:
        events = json.load(f)["traceEvents"]
    totals = defaultdict(float)
    spans = {}
    for e in events:
        if e.get("ph") != "X":
            continue
        totals[e["name"]] += e["dur"] / 1e3
        start, end = e["ts"], e["ts"] + e["dur"]
        first, last = spans.get(e["tid"], (start, end))
        spans[e["tid"]] = (min(first, start), max(last, end))
    thread_ms = sum(last - first for first, last in spans.values()) / 1e3
    return totals, thread_ms, len(spans)


def main(paths):
    if not paths:
        sys.exit(__doc__)
    runs = [(p, *stage_totals(p)) for p in paths]
    stages = sorted({s for _, totals, _, _ in runs for s in totals}, key=lambda s: -runs[0][1].get(s, 0.0))
    header = "| stage | " + " | ".join(f"{p}: ms (share)" for p, *_ in runs)
    if len(runs) > 1:
        header += " | " + " | ".join(f"{p} / {runs[0][0]}" for p, *_ in runs[1:])
    print(header + " |")
    print("|---" * (1 + len(runs) + max(0, len(runs) - 1)) + "|")
    rows = stages + ["outside stages", "threads' wall"]
    for stage in rows:
        cells, values = [], []
        for _, totals, thread_ms, _ in runs:
            in_stages = sum(totals.values())
            value = {"outside stages": thread_ms - in_stages, "threads' wall": thread_ms}.get(stage,
                                                                                            totals.get(stage, 0.0))
            values.append(value)
            cells.append(f"{value:.1f} ({value / thread_ms:.0%})" if thread_ms else f"{value:.1f}")
        ratios = [f"{v / values[0]:.2f}x" if values[0] else "" for v in values[1:]]
        print(f"| {stage} | " + " | ".join(cells + ratios) + " |")
    print("threads: " + ", ".join(f"{p} {n}" for p, _, _, n in runs))


if __name__ == "__main__":
    main(sys.argv[1:])
