"""User annotations (``record_function`` ranges, ``ProfilerStep#N``): their CPU and GPU time.

Per annotation name: how often it was recorded on the CPU and the time those ranges took (sum, mean),
the same for its device-side copies (``gpu_user_annotation``), and the device time of the activities
launched inside its CPU ranges (by when their runtime call started).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from layerperf.data.calls import Annotations, KernelTable


@dataclass(frozen=True, slots=True)
class AnnotationTime:
    name: str
    cpu_calls: int
    cpu_ns: float
    gpu_calls: int
    gpu_ns: float
    launched_device_ns: float | None  # None: no kernel table, or no launch times


def annotation_times(notes: Annotations, kernels: KernelTable | None) -> tuple[AnnotationTime, ...]:
    out = []
    names = notes.name.tolist()
    launch = kernels.launch_ts_ns if kernels is not None else np.zeros(0)
    known = ~np.isnan(launch)
    order = np.argsort(launch[known]) if known.any() else np.zeros(0, dtype=np.int64)
    sorted_ts = launch[known][order]
    cum = np.concatenate([[0.0], np.cumsum(kernels.dur_ns[known][order])]) if kernels is not None else np.zeros(1)
    for name in dict.fromkeys(names):
        mine = np.asarray([n == name for n in names], dtype=bool)
        cpu, gpu = mine & ~notes.gpu, mine & notes.gpu
        launched = None
        if sorted_ts.size:
            s, e = notes.ts_ns[cpu], notes.ts_ns[cpu] + notes.dur_ns[cpu]
            lo, hi = np.searchsorted(sorted_ts, s, side="left"), np.searchsorted(sorted_ts, e, side="left")
            launched = float((cum[hi] - cum[lo]).sum())
        out.append(AnnotationTime(name, int(cpu.sum()), float(notes.dur_ns[cpu].sum()), int(gpu.sum()),
                                  float(notes.dur_ns[gpu].sum()), launched))
    return tuple(sorted(out, key=lambda a: -(a.cpu_ns + a.gpu_ns)))
