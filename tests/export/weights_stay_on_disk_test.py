"""`aotpipe compile` of a .pt2 archive never reads its weights: the process's peak memory stays
flat when the weights grow 10x. Two MLPs of the same depth are exported with torch.export, one 10x
the other's parameter bytes; each is compiled twice (cache off, then a cold and a warm run with
the cache on, whose file records key the archive without its weights). The difference in peak
resident memory between the two archives must stay under 10% of the difference in their weights.
(Time is not asserted: speed is the benchmark's, bench/cli/scaling.py --weights.)

Usage: weights_stay_on_disk_test.py --aotpipe PATH --work DIR
"""
import argparse
import os
import shutil
import subprocess
import sys

# Run in a child process: this one must not hold torch, or every child it forks would start with
# torch's resident pages (the peak a child's rusage reports includes what it had before exec).
EXPORT = """
import sys, torch
class Mlp(torch.nn.Module):
    def __init__(self, width, depth=4):
        super().__init__()
        self.layers = torch.nn.ModuleList(torch.nn.Linear(width, width) for _ in range(depth))
    def forward(self, x):
        for layer in self.layers:
            x = torch.relu(layer(x))
        return x.sum()
width, path = int(sys.argv[1]), sys.argv[2]
torch.manual_seed(0)
model = Mlp(width).train()
torch.export.save(torch.export.export(model, (torch.randn(2, width),)), path)
print(sum(p.numel() * p.element_size() for p in model.parameters()))
"""


def export(width, path):
    out = subprocess.run([sys.executable, "-c", EXPORT, str(width), path], check=True, stdout=subprocess.PIPE, text=True)
    return int(out.stdout.split()[-1])


def peak_kb(cmd, env):
    """The child's peak resident set (kB) and its output; fails the test if it fails."""
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env)
    out = proc.stdout.read().decode(errors="replace")
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        sys.exit(f"FAILED: {' '.join(cmd)} exited {proc.returncode}:\n{out}")
    return usage.ru_maxrss


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--aotpipe", required=True)
    ap.add_argument("--work", required=True)
    args = ap.parse_args()
    shutil.rmtree(args.work, ignore_errors=True)
    os.makedirs(args.work)
    narrow, wide = os.path.join(args.work, "narrow.pt2"), os.path.join(args.work, "wide.pt2")
    narrow_bytes = export(512, narrow)
    wide_bytes = export(1620, wide)
    growth_kb = (wide_bytes - narrow_bytes) / 1024
    print(f"weights: narrow {narrow_bytes / 1e6:.1f} MB, wide {wide_bytes / 1e6:.1f} MB "
          f"({wide_bytes / narrow_bytes:.1f}x)")
    env = dict(os.environ, OMP_NUM_THREADS="1")
    cache = os.path.join(args.work, "cache")
    runs = {
        "--no-cache": ["--no-cache"],
        "cache, cold": ["--cache-dir", cache],
        "cache, warm (file record)": ["--cache-dir", cache],
    }
    failures = 0
    peaks = {}
    for label, extra in runs.items():
        for name, path in (("narrow", narrow), ("wide", wide)):
            peaks[(label, name)] = peak_kb([args.aotpipe, "compile", path, "-j1", *extra], env)
        difference = peaks[(label, "wide")] - peaks[(label, "narrow")]
        ok = difference < 0.1 * growth_kb
        failures += not ok
        print(f"{label:28s} peak RSS narrow {peaks[(label, 'narrow')] / 1024:7.1f} MB, wide "
              f"{peaks[(label, 'wide')] / 1024:7.1f} MB: +{difference / 1024:.1f} MB for "
              f"+{growth_kb / 1024:.1f} MB of weights {'ok' if ok else 'FAILED (over 10%)'}")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
