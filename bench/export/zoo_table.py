"""The model zoo's table: every model of tests/zoo/export_zoo.py, its compile and step times from
C++ (bench/export/zoo_step_bench) beside PyTorch eager's step in Python, and the zoo test's result.

Each round goes through the models in groups of --group: PyTorch eager's steps for the group,
then zoo_step_bench over it (compiled, planned and interpreted steps, themselves interleaved), the
two sides in the other order in every other round; each figure is the median over the rounds. A
model's two sides are measured seconds apart, not minutes, so this shared machine's slow and fast
phases (1.5x apart, lasting minutes: docs/zoo.md) hit both sides alike.

Columns (milliseconds, medians):
  ops          call nodes of the training export
  compile      the training compile at the sample inputs (compile_exported_program, first use)
  first step   load + compile + the first training step, from scratch, in one process
  eager        one training step of the nn.Module in PyTorch eager (forward, backward, zero_grad)
  compiled     the same step of the compiled program from C++
  planned      the compiled step with the planned backend (out= kernels writing into one arena
               per graph run, docs/memory.md)
  interp.      the same step of the exported program run by aotpipe's interpreter (no compile)
  c/e          compiled / eager, the median over the rounds of each round's ratio (the two sides of a
               round measured seconds apart); below 1: the compiled step is faster
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
    model = copy.deepcopy(initial).train()

    def step():
        outs = zoo.as_list(model(*inputs))
        diff = [(o, g) for o, g in zip(outs, grad_outputs) if o.requires_grad and g.numel() == o.numel() and g.numel()]
        torch.autograd.backward([o for o, _ in diff], [g for _, g in diff])
        model.zero_grad(set_to_none=True)

    step()
    return meter.peak_bytes(step)


def bench_round(bench, zoo_path, names):
    out = subprocess.run([bench, "--zoo", zoo_path, "--only", ",".join(names), "--samples", "5"],
                         stdout=subprocess.PIPE, text=True)
    rows = {}
    for line in out.stdout.splitlines():
        if line.startswith("{"):
            row = json.loads(line)
            rows[row["model"]] = row
    return rows


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


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--zoo", help="the zoo's folder (default: scripts/zoo-export's)")
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--only")
    ap.add_argument("--group", type=int, default=8, help="models measured side by side before the next group")
    opts = ap.parse_args()
    zoo_path = opts.zoo or zoo_dir()
    with open(os.path.join(zoo_path, "manifest.json")) as f:
        manifest = json.load(f)
    entries = [m for m in manifest["models"] if not opts.only or m["name"] in opts.only.split(",")]
    exported = [m["name"] for m in entries if m["status"] != "export_failed"]
    builders = {name: (make_model, make_inputs) for name, _, _, make_model, make_inputs in zoo.all_models()}
    models = {}
    for name in exported:
        make_model, make_inputs = builders[name]
        torch.manual_seed(0)
        initial = zoo.zero_dropout(make_model()).train()
        inputs = list(make_inputs())
        outputs = zoo.as_list(copy.deepcopy(initial)(*zoo.clone_inputs(inputs)))
        models[name] = (initial, inputs, zoo.seeds_for(outputs))

    bench = os.path.join(opts.build, "bench", "export", "zoo_step_bench")
    meter = CpuMemoryMeter(opts.build)
    eager_peak = {name: eager_peak_bytes(meter, *models[name]) for name in exported}
    eager, compiled = [], []
    groups = [exported[i:i + max(1, opts.group)] for i in range(0, len(exported), max(1, opts.group))]
    for r in range(opts.rounds):
        print(f"round {r + 1}/{opts.rounds}: {len(groups)} groups of eager and zoo_step_bench", file=sys.stderr,
              flush=True)
        eager.append({})
        compiled.append({})
        for group in groups:
            sides = [lambda: eager[-1].update(eager_round({name: models[name] for name in group})),
                     lambda: compiled[-1].update(bench_round(bench, zoo_path, group))]
            for side in (sides if r % 2 == 0 else sides[::-1]):
                side()
    results = test_results(os.path.join(opts.build, "tests", "zoo", "zoo_test"), zoo_path, [m["name"] for m in entries])

    print(f"torch {manifest['torch']}, torchvision {manifest['torchvision']}, timm {manifest['timm']}, "
          f"transformers {manifest['transformers']}; {os.cpu_count()} CPUs; medians of {opts.rounds} rounds (ms)\n")
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
        e_train = median([e[name][0] for e in eager])
        e_eval = median([e[name][1] for e in eager])
        c_train = col("compiled_step_ms")
        # Paired: each round's compiled step over the same round's eager step (seconds apart), then
        # the median of those ratios, so one round in the machine's slow phase on one side only
        # does not decide the ratio as it would in a ratio of medians.
        ratio = median([row.get("compiled_step_ms") / e[name][0] if row.get("compiled_step_ms") and e[name][0]
                        else None for row, e in zip(rows, eager)])
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
