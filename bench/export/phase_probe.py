"""Watches this machine's slow phases (docs/zoo.md) from one long-lived process: every couple of
seconds, eager PyTorch's ResNet-18 training step (batch 2, 64x64, as the zoo's tv_resnet18) beside
two kernels that stay in cache (a 512x512 matrix product on one thread and on two, and one 64-channel
3x3 convolution forward and backward), with the process's user and system CPU time, minor page
faults and the machine's steal time over the same interval.

What it showed (session 42): the ResNet step flips between about 34 and 43-49 ms for 10-60 s at a
time within one process, its user time per step rising by the same 40% while the in-cache kernels,
the page faults, the system time and the steal time stay put: a phase of the host, not of a
process or of what ran before.

Usage: $AOTPIPE_PYTHON bench/export/phase_probe.py [--seconds 300] [--interval 2]
"""
import argparse
import resource
import time

import torch
import torchvision


def steal_ticks():
    with open("/proc/stat") as f:
        return int(f.readline().split()[8])  # cpu user nice system idle iowait irq softirq steal


def per_call_ms(fn, calls):
    fn()
    t = time.perf_counter()
    for _ in range(calls):
        fn()
    return (time.perf_counter() - t) / calls * 1e3


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=300)
    ap.add_argument("--interval", type=float, default=2)
    opts = ap.parse_args()

    torch.manual_seed(0)
    a, b = torch.randn(512, 512), torch.randn(512, 512)
    x = torch.randn(2, 64, 56, 56, requires_grad=True)
    w = torch.randn(64, 64, 3, 3, requires_grad=True)
    model, image = torchvision.models.resnet18(), torch.randn(2, 3, 64, 64)

    def conv():
        torch.nn.functional.conv2d(x, w, padding=1).sum().backward()

    def resnet_step():
        model(image).sum().backward()
        model.zero_grad(set_to_none=True)

    steps = 10
    print("     s  steal  mm 1t ms  mm 2t ms  scaling  conv ms  resnet ms  user ms/step  sys ms/step  faults/step",
          flush=True)
    start = time.time()
    while time.time() - start < opts.seconds:
        steal = steal_ticks()
        torch.set_num_threads(1)
        mm1 = per_call_ms(lambda: a @ b, 200)
        torch.set_num_threads(2)
        mm2 = per_call_ms(lambda: a @ b, 200)
        conv_ms = per_call_ms(conv, 20)
        before = resource.getrusage(resource.RUSAGE_SELF)
        resnet_ms = per_call_ms(resnet_step, steps)
        after = resource.getrusage(resource.RUSAGE_SELF)
        # getrusage counts the warm-up call too: steps + 1 steps.
        user = (after.ru_utime - before.ru_utime) * 1e3 / (steps + 1)
        system = (after.ru_stime - before.ru_stime) * 1e3 / (steps + 1)
        faults = (after.ru_minflt - before.ru_minflt) / (steps + 1)
        print(f"{time.time() - start:6.0f} {steal_ticks() - steal:6d} {mm1:9.3f} {mm2:9.3f} {mm1 / mm2:8.2f} "
              f"{conv_ms:8.3f} {resnet_ms:10.2f} {user:13.1f} {system:12.1f} {faults:12.0f}", flush=True)
        time.sleep(opts.interval)


if __name__ == "__main__":
    main()
