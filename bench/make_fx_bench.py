"""make_fx on the 1,000-op program of bench/graph/trace_bench.cpp, with the installed torch.

    $AOTPIPE_PYTHON bench/make_fx_bench.py [--repeat N]

Prints the time per trace and per op for tracing_mode="fake" (FakeTensorMode) and for the
same with functionalization (torch.func.functionalize, as AOTAutograd does), plus the meta
tensor floor in Python.
"""
import argparse
import time

import torch
from torch.fx.experimental.proxy_tensor import make_fx

K_OPS = 1000


def program(x, y):
    for _ in range(K_OPS // 4):
        x = x * y
        x = x + 1.0
        x = x.sin()
        x = x.t()
    return x


def bench(name, fn, repeat):
    fn()  # warm-up
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    best = min(times)
    med = sorted(times)[len(times) // 2]
    print(f"{name:40s} median {med * 1e3:8.2f} ms  best {best * 1e3:8.2f} ms  "
          f"per op {med / K_OPS * 1e6:7.2f} us")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=10)
    args = ap.parse_args()
    torch.set_num_threads(1)
    x, y = torch.randn(64, 64), torch.randn(64, 64)
    g = make_fx(program, tracing_mode="fake")(x, y)
    n = sum(1 for node in g.graph.nodes if node.op == "call_function")
    print(f"torch {torch.__version__}; make_fx graph has {n} call nodes")
    bench("make_fx fake", lambda: make_fx(program, tracing_mode="fake")(x, y), args.repeat)
    bench("make_fx fake + functionalize",
          lambda: make_fx(torch.func.functionalize(program, remove="mutations_and_views"),
                          tracing_mode="fake")(x, y), args.repeat)
    bench("make_fx real", lambda: make_fx(program, tracing_mode="real")(x, y), args.repeat)
    xm, ym = x.to("meta"), y.to("meta")
    bench("meta tensors, no recording (Python)", lambda: program(xm, ym), args.repeat)


if __name__ == "__main__":
    main()
