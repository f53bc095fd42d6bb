"""GPT-2 small training step on a GPU: PyTorch eager from Python against aotpipe's compiled step
under each backend and partitioner, side by side in one run, one table (docs/benchmarks/cuda.md).

The model is GPT-2 small as Hugging Face's GPT2LMHeadModel builds it by default (12 layers, 768
wide, 12 heads, vocabulary 50257, 1024 positions, tanh GELU, tied output embedding, causal SDPA,
dropout 0), written here in plain PyTorch so the GPU machine, which has torch but not
transformers, can build it; the loss is cross-entropy over every token (the package training
test's LanguageModelLoss). It is exported once on the CPU with torch.export (the .pt2 road a user
takes), then:
  - eager: the nn.Module itself on the GPU (loss, backward, grads set to None, synchronize);
  - aotpipe: bench/export/cuda_step_bench, one process per configuration (backend x partitioner),
    loading the same archive onto cuda:0.
Each figure is the median over --samples batches of steps, each step ending with a device
synchronize; peak memory is what a steady step holds beyond the model's state and inputs.

    gpt2_cuda_step.py --bench build/bench/export/cuda_step_bench [--layers 12] [--batch 8] [--seq 256]
                      [--dtype bf16|fp32] [--samples 7] [--configs interpreter:auto,cuda_graphs:auto,...]
                      [--inductor] [--device cuda|cpu] [--width 768 --heads 12 --vocab 50257]

--device cpu (with a small --width/--vocab) runs everything on the CPU, peak memory left out: the
benchmark's own check where there is no GPU (tests/export, gpt2_step_bench_on_cpu).
"""
import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

DEFAULT_CONFIGS = "interpreter:auto,planned:auto,interpreter:default,cuda_graphs:auto,cuda_graphs_lend:auto,cuda_graphs:min_cut"


class Block(nn.Module):
    def __init__(self, width, heads):
        super().__init__()
        self.heads = heads
        self.ln_1 = nn.LayerNorm(width, eps=1e-5)
        self.c_attn = nn.Linear(width, 3 * width)
        self.attn_proj = nn.Linear(width, width)
        self.ln_2 = nn.LayerNorm(width, eps=1e-5)
        self.c_fc = nn.Linear(width, 4 * width)
        self.mlp_proj = nn.Linear(4 * width, width)

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.c_attn(self.ln_1(x)).split(c, dim=2)
        q, k, v = (y.view(b, t, self.heads, c // self.heads).transpose(1, 2) for y in (q, k, v))
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.attn_proj(a.transpose(1, 2).reshape(b, t, c))
        return x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh"))


class Gpt2Loss(nn.Module):
    def __init__(self, layers, width=768, heads=12, vocab=50257, positions=1024):
        super().__init__()
        self.wte = nn.Embedding(vocab, width)
        self.wpe = nn.Embedding(positions, width)
        self.blocks = nn.ModuleList(Block(width, heads) for _ in range(layers))
        self.ln_f = nn.LayerNorm(width, eps=1e-5)
        self.lm_head = nn.Linear(width, vocab, bias=False)
        self.lm_head.weight = self.wte.weight  # tied, as GPT2LMHeadModel's
        for p in self.parameters():
            nn.init.normal_(p, std=0.02) if p.dim() > 1 else nn.init.zeros_(p)

    def forward(self, ids, targets):
        x = self.wte(ids) + self.wpe(torch.arange(ids.shape[1], device=ids.device))
        for block in self.blocks:
            x = block(x)
        logits = self.lm_head(self.ln_f(x))
        return (F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1)),)


def median_step_ms(step, samples, batch_ms=200.0):
    step()
    step()
    start = time.perf_counter()
    step()
    one = (time.perf_counter() - start) * 1e3
    batch = max(1, int(batch_ms / max(one, 1e-3)))
    per_step = []
    for _ in range(samples):
        start = time.perf_counter()
        for _ in range(batch):
            step()
        per_step.append((time.perf_counter() - start) * 1e3 / batch)
    return statistics.median(per_step)


def eager_row(model, ids, targets, samples, name="eager"):
    def step():
        (loss,) = model(ids, targets)
        loss.backward()
        for p in model.parameters():
            p.grad = None
        if ids.is_cuda:
            torch.cuda.synchronize()

    start = time.perf_counter()
    step()
    first = (time.perf_counter() - start) * 1e3
    step()
    peak = None  # the CPU's is zoo_table.py's business
    if ids.is_cuda:
        base = torch.cuda.memory_allocated()
        torch.cuda.reset_peak_memory_stats()
        step()
        peak = torch.cuda.max_memory_allocated() - base
    return {"config": name, "step_ms": median_step_ms(step, samples), "peak_bytes": peak, "first_step_ms": first}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bench", required=True, help="the cuda_step_bench program")
    parser.add_argument("--layers", type=int, default=12)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--seq", type=int, default=256)
    parser.add_argument("--dtype", choices=("bf16", "fp32"), default="bf16")
    parser.add_argument("--samples", type=int, default=7)
    parser.add_argument("--configs", default=DEFAULT_CONFIGS, help="backend:partitioner, comma-separated")
    parser.add_argument("--inductor", action="store_true", help="also torch.compile (Inductor; slow to compile)")
    parser.add_argument("--timeout", type=float, default=120, help="seconds per aotpipe configuration")
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    parser.add_argument("--width", type=int, default=768)
    parser.add_argument("--heads", type=int, default=12)
    parser.add_argument("--vocab", type=int, default=50257)
    args = parser.parse_args()
    if args.device == "cuda" and not torch.cuda.is_available():
        sys.exit("gpt2_cuda_step.py: no CUDA device")
    torch.manual_seed(0)
    dtype = torch.bfloat16 if args.dtype == "bf16" else torch.float32
    model = Gpt2Loss(args.layers, args.width, args.heads, args.vocab).to(dtype).train()
    ids = torch.randint(0, args.vocab, (args.batch, args.seq))
    targets = torch.roll(ids, -1, dims=1)
    with tempfile.TemporaryDirectory() as tmp:
        pt2 = os.path.join(tmp, f"gpt2_{args.layers}l_{args.dtype}.pt2")
        start = time.perf_counter()
        torch.export.save(torch.export.export(model, (ids, targets)), pt2)
        export_s = time.perf_counter() - start
        print(f"exported in {export_s:.1f} s", flush=True)
        model = model.to(args.device)
        ids, targets = ids.to(args.device), targets.to(args.device)
        state = torch.cuda.memory_allocated() if args.device == "cuda" else None
        rows = []

        def add(row):  # each row as soon as it is measured: a run cut short keeps what it has
            rows.append(row)
            print("row: " + json.dumps(row), flush=True)

        add(eager_row(model, ids, targets, args.samples))
        if args.inductor:
            add(eager_row(torch.compile(model), ids, targets, args.samples, "torch.compile"))
        del model
        if args.device == "cuda":
            torch.cuda.empty_cache()
        for config in args.configs.split(","):
            backend, partitioner = config.split(":")
            cmd = [args.bench, pt2, "--backend", backend, "--partitioner", partitioner, "--samples", str(args.samples),
                   "--device", args.device]
            try:
                done = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout)
            except subprocess.TimeoutExpired:
                add({"config": config, "error": f"timed out after {args.timeout:.0f} s"})
                continue
            if done.returncode != 0:
                add({"config": config, "error": (done.stderr or done.stdout).strip()[-500:]})
                continue
            row = json.loads(done.stdout.strip().splitlines()[-1])
            row["config"] = config
            if done.stderr.strip():
                row["stderr"] = done.stderr.strip()[-300:]
            add(row)

    device = torch.cuda.get_device_name() if args.device == "cuda" else "cpu"
    state_mb = f"{state / 2**20:.0f} MB" if state is not None else "-"
    print(f"device: {device}; GPT-2 small, {args.layers} layers, {args.width} wide, vocabulary {args.vocab}, batch "
          f"{args.batch} x {args.seq}, {args.dtype}; state {state_mb}; export {export_s:.1f} s; "
          f"medians of {args.samples} batches")
    eager_ms = rows[0]["step_ms"]
    print("| configuration | step ms | eager / this | peak MB | first step s | compile ms | partitioner | saved "
          "| ops fw / bw | replays / fallbacks | lent / read in place / taken back |")
    print("|---|--:|--:|--:|--:|--:|---|--:|--:|--:|--:|")
    for r in rows:
        if "error" in r:
            print(f"| {r['config']} | failed: {r['error']} |")
            continue
        ops = f"{r['ops_forward']} / {r['ops_backward']}" if "ops_forward" in r else ""
        graphs = f"{r['replays']} / {r['fallback_calls']}" if "replays" in r else ""
        lent = (f"{r['lent_values']} / {r['lent_inputs_read']} / {r['lent_values_copied']}"
                if r.get("lent_values") else "")
        compile_ms = f"{r['compile_ms']:.0f}" if "compile_ms" in r else ""
        partitioner = r.get("partitioner", "").split(" ")[0]  # its name; the options are in the JSON
        peak_mb = f"{r['peak_bytes'] / 2**20:.0f}" if r.get("peak_bytes") is not None and args.device == "cuda" else "-"
        print(f"| {r['config']} | {r['step_ms']:.2f} | {eager_ms / r['step_ms']:.2f} | {peak_mb} "
              f"| {r['first_step_ms'] / 1e3:.2f} | {compile_ms} | {partitioner} | {r.get('saved', '')} "
              f"| {ops} | {graphs} | {lent} |")
    for r in rows:
        for note in r.get("notes", []):
            print(f"note ({r['config']}): {note}")
        if r.get("stderr"):
            print(f"stderr ({r['config']}): {r['stderr']}")
        if r.get("backend") == "planned":
            print(f"planned ({r['config']}): {r.get('planned_runs')} runs on the plan, {r.get('unplanned_runs')} off it, "
                  f"{r.get('out_calls_refused')} out= calls refused, "
                  f"{r.get('out_calls_out_of_memory')} short of memory")
    print("json: " + json.dumps(rows))
    return 1 if any("error" in r for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
