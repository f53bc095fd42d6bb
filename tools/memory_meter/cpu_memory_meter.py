"""PyTorch eager's side of tools/memory_meter/cpu_memory_meter.h: the same allocator, loaded with ctypes
into this process (after `import torch`, so that it wraps the libc10 that torch uses).

    meter = CpuMemoryMeter(build_dir)
    peak = meter.peak_bytes(step)   # the most bytes step's new tensors held at once
"""
import ctypes
import os

import torch  # noqa: F401  (loads libc10 before the meter binds to it)


class CpuMemoryMeter:
    def __init__(self, build_dir):
        path = os.path.join(build_dir, "tools", "memory_meter", "libaotpipe_cpu_memory_meter.so")
        self._lib = ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
        self._lib.aotpipe_meter_install.restype = ctypes.c_bool
        self._lib.aotpipe_meter_peak_bytes.restype = ctypes.c_int64
        if not self._lib.aotpipe_meter_install():
            raise RuntimeError("cannot install the CPU memory meter: another allocator has a higher priority")

    def peak_bytes(self, fn):
        self._lib.aotpipe_meter_start()
        try:
            fn()
        finally:
            self._lib.aotpipe_meter_stop()
        return self._lib.aotpipe_meter_peak_bytes()
