"""User annotations (``record_function`` ranges, ``ProfilerStep#N``): their CPU and GPU time.

Per annotation name: how often it was recorded on the CPU and the time those ranges took (sum, mean),
the same for its device-side copies (``gpu_user_annotation``), and the device time of the activities
launched inside its CPU ranges (by when their runtime call started).

The annotations are few and stay in memory; the activities pass by launch time
(``blocks("launch_ts_ns")``), and for each CPU range boundary t the fold keeps the device time of the
activities launched before t (a running sum per boundary, added to block by block). A range's launched
time is the difference at its two ends. Memory: one number per boundary.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from layerperf.analysis.gpu.source import Activities, activities
from layerperf.data.calls import Annotations, KernelTable


@dataclass(frozen=True, slots=True)
class AnnotationTime:
    name: str
    cpu_calls: int
    cpu_ns: float
    gpu_calls: int
    gpu_ns: float
    launched_device_ns: float | None  # None: no kernel table, or no launch times


def launched_before(kernels: KernelTable | Activities, bounds: np.ndarray) -> tuple[np.ndarray, int]:
    """For each of the sorted times ``bounds``: the device time of the activities launched before it;
    and how many activities have a known launch."""
    before, known = np.zeros(bounds.size), 0
    for block in activities(kernels).blocks("launch_ts_ns"):
        if not len(block):
            continue
        ok = ~np.isnan(block.launch_ts_ns)
        ts = block.launch_ts_ns[ok]
        if not ts.size:  # NaN sorts last: no later block has a launch time either
            break
        known += int(ts.size)
        cum = np.concatenate([[0.0], np.cumsum(block.dur_ns[ok])])
        before += cum[np.searchsorted(ts, bounds, side="left")]
    return before, known


def annotation_times(notes: Annotations, kernels: KernelTable | Activities | None) -> tuple[AnnotationTime, ...]:
    names = notes.name.tolist()
    cpu_rows = ~notes.gpu
    start, end = notes.ts_ns, notes.ts_ns + notes.dur_ns
    bounds = np.unique(np.concatenate([start[cpu_rows], end[cpu_rows]]))
    before, known = launched_before(kernels, bounds) if kernels is not None else (bounds, 0)
    out = []
    for name in dict.fromkeys(names):
        mine = np.asarray([n == name for n in names], dtype=bool)
        cpu, gpu = mine & cpu_rows, mine & notes.gpu
        launched = None
        if known:
            lo, hi = np.searchsorted(bounds, start[cpu]), np.searchsorted(bounds, end[cpu])
            launched = float((before[hi] - before[lo]).sum())
        out.append(AnnotationTime(name, int(cpu.sum()), float(notes.dur_ns[cpu].sum()), int(gpu.sum()),
                                  float(notes.dur_ns[gpu].sum()), launched))
    return tuple(sorted(out, key=lambda a: -(a.cpu_ns + a.gpu_ns)))
