"""Device time by kind of kernel: computation, memory (copies, sets), communication, other."""

from __future__ import annotations

from dataclasses import dataclass

from layerperf.analysis.gpu.intervals import KINDS, kinds
from layerperf.data.calls import KernelTable


@dataclass(frozen=True, slots=True)
class KindTime:
    """One kind's activities: count, summed time (ns), share of all device time, and the spread of one
    activity's time (ns; population standard deviation)."""

    kind: str
    calls: int
    total_ns: float
    share: float | None
    mean_ns: float
    min_ns: float
    max_ns: float
    stddev_ns: float


def kernel_types(kernels: KernelTable) -> tuple[KindTime, ...]:
    """Per kind present, largest total first."""
    kind = kinds(kernels)
    dur = kernels.dur_ns
    all_ns = float(dur.sum())
    out = []
    for k in KINDS:
        d = dur[kind == k]
        if d.size:
            out.append(KindTime(k, int(d.size), float(d.sum()), float(d.sum()) / all_ns if all_ns > 0 else None,
                                float(d.mean()), float(d.min()), float(d.max()), float(d.std())))
    return tuple(sorted(out, key=lambda r: -r.total_ns))
