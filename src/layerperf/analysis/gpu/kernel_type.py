"""Device time by kind of kernel: computation, memory (copies, sets), communication, other.

A fold over the activities in any order: per kind a :class:`~layerperf.analysis.gpu.accumulate.Stats`
group (count, total, least, largest, mean and squared deviations). Memory: four groups.
"""

from __future__ import annotations

from dataclasses import dataclass

from layerperf.analysis.gpu.accumulate import Stats
from layerperf.analysis.gpu.intervals import KINDS, kind_codes
from layerperf.analysis.gpu.source import Activities, activities
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


def kernel_types(kernels: KernelTable | Activities) -> tuple[KindTime, ...]:
    """Per kind present, largest total first."""
    stats = Stats()
    for block in activities(kernels).blocks():
        stats.add(kind_codes(block), block.dur_ns)
    all_ns = float(stats.total.sum())
    out = []
    for k in range(stats.count.size):
        n, total = int(stats.count[k]), float(stats.total[k])
        if n:
            out.append(KindTime(KINDS[k], n, total, total / all_ns if all_ns > 0 else None, total / n,
                                float(stats.least[k]), float(stats.most[k]), stats.std(k)))
    return tuple(sorted(out, key=lambda r: -r.total_ns))
