"""The model zoo's table: every model of tests/zoo/export_zoo.py, its compile and step times from
C++ (bench/export/zoo_step_bench) beside PyTorch eager's step in Python, and the zoo test's result.

Each round goes through the models in groups of --group, each group in a fresh Python process
with a fresh zoo_step_bench: PyTorch eager's steps for the group, then zoo_step_bench over it
(compiled, planned and interpreted steps, themselves interleaved), the two sides in the other
order in every other round; each figure is the median over the rounds. c/e is measured apart
from those columns, as pairs: zoo_step_bench --serve keeps each model's compiled step, and the
Python process alternates a batch of eager steps with a batch of compiled ones (about --pair-ms
each, --pairs times per model per round), the two batches of a pair milliseconds apart.

Why so (docs/zoo.md, "Measuring on this machine"): two things made one side of a model up to
2x slower than the other for reasons that are not the programs.
- glibc's malloc: whether a step's large blocks (gradients, activations) come back from the
  heap or are trimmed and mapped again depends on the process's heap, i.e. on everything it ran
  before; mapped again, ResNet-18's step takes ~5,000 page faults (20 MB zeroed) and twice the
  time. Both sides run with the same settings that keep freed memory in the process,
  MALLOC_TRIM_THRESHOLD_, MALLOC_MMAP_THRESHOLD_ (its largest, 32 MB) and MALLOC_TOP_PAD_ (see
  MALLOC_TUNING; --malloc-defaults leaves glibc's defaults): no page faults in a step, eager or
  compiled, whatever ran before.
- The machine: phases of seconds to a minute in which compute-bound steps take ~1.4x the user
  CPU time, with no steal time and no more page faults (bench/export/phase_probe.py). The two
  batches of a pair see the same phase, and each round draws both processes afresh.

Columns (milliseconds, medians):
  ops          call nodes of the training export
  compile      the training compile at the sample inputs (compile_exported_program, first use)
  first step   load + compile + the first training step, from scratch, in one process
  eager        one training step of the nn.Module in PyTorch eager (forward, backward, zero_grad)
  compiled     the same step of the compiled program from C++
  planned      the compiled step with the planned backend (out= kernels writing into one arena
               per graph run, docs/memory.md)
  interp.      the same step of the exported program run by aotpipe's interpreter (no compile)
  c/e          compiled / eager: the median over every pair of batches (all rounds) of the pair's
               ratio; below 1: the compiled step is faster
  peak e / c   MB: the most CPU memory one training step holds at once beyond what was live before
               it, eager / compiled (tools/memory_meter, the same allocator in both processes);
               the compiled step is its first after the compile, so buffers a backend keeps count
  m c/e        compiled peak / eager peak
  peak p       MB: the planned backend's step peak, measured as the compiled one's
  eval e / c   one eval-mode call under no_grad: eager / compiled (a program with data-dependent
               sizes is compiled in regions around them: docs/export.md)
  result       the zoo test (zoo_test --gtest_filter=Zoo.NAME): ok, FAILED, or skipped (no export)

Usage: $AOTPIPE_PYTHON bench/export/zoo_table.py [--zoo DIR] [--build build] [--rounds 3]
       [--only NAME,...]   (prints the markdown table of docs/zoo.md)
"""
import argparse
import copy
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tests", "zoo"))

import torch  # noqa: E402

import export_zoo as zoo  # noqa: E402

sys.path.insert(0, os.path.join(ROOT, "tools", "memory_meter"))
from cpu_memory_meter import CpuMemoryMeter  # noqa: E402


def zoo_dir():
    out = subprocess.run([os.path.join(ROOT, "scripts", "zoo-export")], check=True, stdout=subprocess.PIPE, text=True)
    return out.stdout.strip().splitlines()[-1]


def eager_round(models):
    """{name: (train step ms, eval ms)} of one round of PyTorch eager."""
    times = {}
    for name, (initial, inputs, grad_outputs) in models.items():
        times[name] = zoo.timings(initial, inputs, grad_outputs)
    return times


def eager_peak_bytes(meter, initial, inputs, grad_outputs):
    """The most CPU memory one eager training step holds at once beyond what was live before it
    (forward, backward, zero_grad), after one warm-up step: zoo_step_bench's step, in Python."""
    step = eager_step(initial, inputs, grad_outputs, clone_inputs=False)
    step()
    return meter.peak_bytes(step)


SHOW_PAIRS = False  # --show-pairs

# Both sides' processes (this one's workers and zoo_step_bench) keep freed memory instead of
# returning it to the system and faulting it in again at the next step (see the module's doc).
MALLOC_TUNING = {"MALLOC_TRIM_THRESHOLD_": str(1 << 32), "MALLOC_MMAP_THRESHOLD_": str(32 << 20),
                 "MALLOC_TOP_PAD_": str(64 << 20)}


def eager_step(initial, inputs, grad_outputs, clone_inputs=True):
    """One training step of a copy of the model (forward, backward, zero_grad), as zoo.timings
    times it (which gives each step fresh copies of the inputs)."""
    model = copy.deepcopy(initial).train()

    def step():
        outs = zoo.as_list(model(*(zoo.clone_inputs(inputs) if clone_inputs else inputs)))
        diff = [(o, g) for o, g in zip(outs, grad_outputs) if o.requires_grad and g.numel() == o.numel() and g.numel()]
        torch.autograd.backward([o for o, _ in diff], [g for _, g in diff])
        model.zero_grad(set_to_none=True)

    return step


def paired_ratios(server, name, step, compiled_ms, pairs, pair_ms, first):
    """`pairs` ratios compiled / eager, each of two batches of the same number of steps run back to
    back: eager's here, the compiled one in the zoo_step_bench server; `first` says which side
    leads (alternated by the caller). Each batch begins with one untimed step: without it the
    second batch of a pair ran 10-20% slower than the first whichever side it was (ResNet-18:
    compiled / eager 0.98 with eager first, 0.81 with compiled first), paying for caches the
    other process had filled and for its OpenMP threads still spinning after its batch; with it
    the two orders agree (0.91 and 0.90)."""
    def compiled_batch(steps):
        server.stdin.write(f"{name} {steps}\n")
        server.stdin.flush()
        answer = server.stdout.readline().strip()
        return float(answer) if answer and not answer.startswith("error") else None

    def eager_batch(steps):
        step()  # untimed, as the server's first (see above)
        t = time.perf_counter()
        for _ in range(steps):
            step()
        return (time.perf_counter() - t) * 1e3

    step()  # warm-up of this copy
    if compiled_batch(1) is None:
        return []
    steps = max(1, round(pair_ms / max(compiled_ms, 1e-3)))
    ratios = []
    for k in range(pairs):
        if (k % 2 == 0) == (first == "eager"):
            e = eager_batch(steps)
            c = compiled_batch(steps)
        else:
            c = compiled_batch(steps)
            e = eager_batch(steps)
        if c is not None and e > 0:
            ratios.append(c / e)
            if SHOW_PAIRS:
                print(f"  {name} pair {k + 1}: eager {e / steps:.2f} ms, compiled {c / steps:.2f} ms a step, "
                      f"{c / e:.2f}", file=sys.stderr, flush=True)
    return ratios


def bench_round(bench, zoo_path, names, models, pairs, pair_ms, first):
    """zoo_step_bench's rows for `names`, and each model's paired ratios (its server mode)."""
    server = subprocess.Popen([bench, "--zoo", zoo_path, "--only", ",".join(names), "--samples", "5", "--serve"],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    rows, ratios = {}, {}
    for line in server.stdout:
        if line.startswith("{"):
            row = json.loads(line)
            rows[row["model"]] = row
        elif line.strip() == "ready":
            break
    for name in names:
        compiled_ms = rows.get(name, {}).get("compiled_step_ms")
        if compiled_ms:
            ratios[name] = paired_ratios(server, name, eager_step(*models[name]), compiled_ms, pairs, pair_ms, first)
    server.stdin.close()
    server.wait()
    return rows, ratios


def test_results(test, zoo_path, names):
    with tempfile.TemporaryDirectory() as tmp:
        report = os.path.join(tmp, "zoo.json")
        env = dict(os.environ, AOTPIPE_ZOO_DIR=zoo_path)
        subprocess.run([test, "--gtest_brief=1", f"--gtest_output=json:{report}",
                        "--gtest_filter=" + ":".join(f"Zoo.{n}" for n in names)],
                       env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        results = {}
        with open(report) as f:
            for suite in json.load(f)["testsuites"]:
                for case in suite["testsuite"]:
                    if case.get("result") == "SKIPPED":
                        results[case["name"]] = "skipped"
                    else:
                        results[case["name"]] = "FAILED" if case.get("failures") else "ok"
        return results


def median(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def megabytes(v):
    return "-" if v is None else f"{v / 1e6:.2f}"


def fmt(v, digits=1):
    return "-" if v is None else f"{v:.{digits}f}"


def build_models(names):
    """{name: (initial module, inputs, gradients for its outputs)}, as the zoo test builds them."""
    builders = {name: (make_model, make_inputs) for name, _, _, make_model, make_inputs in zoo.all_models()}
    models = {}
    for name in names:
        make_model, make_inputs = builders[name]
        torch.manual_seed(0)
        initial = zoo.zero_dropout(make_model()).train()
        inputs = list(make_inputs())
        outputs = zoo.as_list(copy.deepcopy(initial)(*zoo.clone_inputs(inputs)))
        models[name] = (initial, inputs, zoo.seeds_for(outputs))
    return models


def round_worker(opts):
    """--worker: one round of one group, in a process of its own (see main), as one JSON line."""
    names = opts.only.split(",")
    models = build_models(names)
    first = opts.worker
    result = {}

    def eager_side():
        result["eager"] = eager_round(models)

    def bench_side():
        result["rows"], result["pairs"] = bench_round(opts.bench, opts.zoo, names, models, opts.pairs, opts.pair_ms,
                                                      first)

    for side in ((eager_side, bench_side) if first == "eager" else (bench_side, eager_side)):
        side()
    print(json.dumps(result), flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--zoo", help="the zoo's folder (default: scripts/zoo-export's)")
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--only")
    ap.add_argument("--group", type=int, default=8, help="models measured side by side before the next group")
    ap.add_argument("--pairs", type=int, default=4, help="paired batches per model per round")
    ap.add_argument("--pair-ms", type=float, default=100, help="milliseconds of steps in one batch of a pair")
    ap.add_argument("--show-pairs", action="store_true", help="each pair's two step times, on stderr")
    ap.add_argument("--malloc-defaults", action="store_true",
                    help="leave glibc's malloc settings as they are on both sides (no MALLOC_TUNING)")
    ap.add_argument("--worker", choices=("eager", "compiled"), help=argparse.SUPPRESS)  # which side leads
    ap.add_argument("--bench", help=argparse.SUPPRESS)
    opts = ap.parse_args()
    global SHOW_PAIRS
    SHOW_PAIRS = opts.show_pairs
    if opts.worker:
        return round_worker(opts)
    zoo_path = opts.zoo or zoo_dir()
    with open(os.path.join(zoo_path, "manifest.json")) as f:
        manifest = json.load(f)
    entries = [m for m in manifest["models"] if not opts.only or m["name"] in opts.only.split(",")]
    exported = [m["name"] for m in entries if m["status"] != "export_failed"]
    models = build_models(exported)

    bench = os.path.join(opts.build, "bench", "export", "zoo_step_bench")
    meter = CpuMemoryMeter(opts.build)
    eager_peak = {name: eager_peak_bytes(meter, *models[name]) for name in exported}
    del models
    worker_env = dict(os.environ) if opts.malloc_defaults else dict(os.environ, **MALLOC_TUNING)
    eager, compiled, pair_ratios = [], [], {}
    groups = [exported[i:i + max(1, opts.group)] for i in range(0, len(exported), max(1, opts.group))]
    for r in range(opts.rounds):
        print(f"round {r + 1}/{opts.rounds}: {len(groups)} groups of eager and zoo_step_bench", file=sys.stderr,
              flush=True)
        eager.append({})
        compiled.append({})
        for group in groups:
            # A fresh process for each side of each round: this machine's speed modes can last a
            # process's life (docs/zoo.md), and the eager side must not keep one for the whole table.
            worker = subprocess.run(
                [sys.executable, os.path.abspath(__file__), "--worker", "eager" if r % 2 == 0 else "compiled",
                 "--bench", bench, "--zoo", zoo_path, "--only", ",".join(group), "--pairs", str(opts.pairs),
                 "--pair-ms", str(opts.pair_ms)] + (["--show-pairs"] if opts.show_pairs else []),
                stdout=subprocess.PIPE, text=True, env=worker_env)
            lines = [line for line in worker.stdout.splitlines() if line.startswith("{")]
            if not lines:
                print(f"round {r + 1}: the worker for {','.join(group)} failed (status {worker.returncode})",
                      file=sys.stderr, flush=True)
                continue
            result = json.loads(lines[-1])
            eager[-1].update({name: tuple(times) for name, times in result["eager"].items()})
            compiled[-1].update(result["rows"])
            for name, values in result["pairs"].items():
                pair_ratios.setdefault(name, []).extend(values)
    results = test_results(os.path.join(opts.build, "tests", "zoo", "zoo_test"), zoo_path, [m["name"] for m in entries])

    print(f"torch {manifest['torch']}, torchvision {manifest['torchvision']}, timm {manifest['timm']}, "
          f"transformers {manifest['transformers']}; {os.cpu_count()} CPUs; medians of {opts.rounds} rounds (ms); "
          f"c/e: median of {opts.pairs * opts.rounds} paired batches of about {opts.pair_ms:.0f} ms a side; "
          f"glibc malloc {'defaults' if opts.malloc_defaults else 'keeping freed memory (MALLOC_TUNING)'}\n")
    print("| model | library | ops | compile | first step | eager | compiled | planned | interp. | c/e | peak e / c | m c/e "
          "| peak p | eval e / c | result |")
    print("|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|---|")
    ratios, memory_ratios, planned_ratios, planned_memory_ratios = [], [], [], []
    for m in entries:
        name = m["name"]
        if m["status"] == "export_failed":
            print(f"| {name} | {m['library']} | - | - | - | - | - | - | - | - | - | - | - | - | not exportable: {m.get('error', '?').splitlines()[0][:120]} |")
            continue
        rows = [c.get(name, {}) for c in compiled]
        col = lambda key: median([row.get(key) for row in rows])  # noqa: E731
        e_train = median([e.get(name, (None, None))[0] for e in eager])
        e_eval = median([e.get(name, (None, None))[1] for e in eager])
        c_train = col("compiled_step_ms")
        # Paired batches milliseconds apart (see the module's doc): one phase of the machine each.
        ratio = median(pair_ratios.get(name, []))
        if ratio:
            ratios.append(ratio)
        e_peak, c_peak = eager_peak.get(name), col("compiled_peak_bytes")
        memory_ratio = c_peak / e_peak if c_peak is not None and e_peak else None
        if memory_ratio is not None:
            memory_ratios.append(memory_ratio)
        p_train, p_peak = col("planned_step_ms"), col("planned_peak_bytes")
        if p_train and c_train:
            planned_ratios.append(p_train / c_train)
        if p_peak is not None and c_peak:
            planned_memory_ratios.append(p_peak / c_peak)
        errors = [row["error"] for row in rows if "error" in row]
        train_errors = [row["train_error"] for row in rows if "train_error" in row]
        result = results.get(name, "?") + (f" (bench: {errors[0][:80]})" if errors else "")
        if train_errors:
            result += f" (training step refused: {train_errors[0].split('failed: ')[-1][:90]})"
        if "data_dependent" in m:
            regions = col("compiled_regions")
            result += (f" (compiled in {fmt(regions, 0)} regions around data-dependent sizes "
                       f"{m['data_dependent'][0]}..{m['data_dependent'][-1]})")
        print(f"| {name} | {m['library']} | {m.get('train_ops', '-')} | {fmt(col('compile_ms'))} | "
              f"{fmt(col('first_step_ms'))} | {fmt(e_train, 2)} | {fmt(c_train, 2)} | {fmt(p_train, 2)} | "
              f"{fmt(col('interpreted_step_ms'), 2)} | {fmt(ratio, 2)} | {megabytes(e_peak)} / {megabytes(c_peak)} | "
              f"{fmt(memory_ratio, 2)} | {megabytes(p_peak)} | {fmt(e_eval, 2)} / "
              f"{fmt(col('compiled_eval_ms'), 2)} | {result} |")
    for what, values in (("compiled / eager training step time", ratios),
                         ("compiled / eager training step peak memory", memory_ratios),
                         ("planned / compiled training step time", planned_ratios),
                         ("planned / compiled training step peak memory", planned_memory_ratios)):
        if values:
            print(f"\n{what}: geomean {statistics.geometric_mean(values):.2f}, median "
                  f"{statistics.median(values):.2f}, min {min(values):.2f}, max {max(values):.2f} over {len(values)} models")
    print("results: " + ", ".join(f"{v} {list(results.values()).count(v)}" for v in sorted(set(results.values()))))


if __name__ == "__main__":
    main()
