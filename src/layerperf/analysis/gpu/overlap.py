"""How much of the device's communication time overlaps its computation.

Communication and computation are the unions of their kernels' intervals (all streams); the overlap is
the time both are running; its share is of the communication time (Holistic Trace Analysis's
``comm_comp_overlap``). A trace without communication kernels has no share (None).
"""

from __future__ import annotations

from dataclasses import dataclass

from layerperf.analysis.gpu.intervals import COMMUNICATION, COMPUTATION, intersection_ns, kinds, merged
from layerperf.data.calls import KernelTable


@dataclass(frozen=True, slots=True)
class Overlap:
    compute_ns: float
    communication_ns: float
    overlap_ns: float

    @property
    def share(self) -> float | None:
        return self.overlap_ns / self.communication_ns if self.communication_ns > 0 else None


def overlap(kernels: KernelTable) -> Overlap:
    kind = kinds(kernels)
    start, end = kernels.ts_ns, kernels.ts_ns + kernels.dur_ns
    comp = merged(start[kind == COMPUTATION], end[kind == COMPUTATION])
    comm = merged(start[kind == COMMUNICATION], end[kind == COMMUNICATION])
    return Overlap(float((comp[1] - comp[0]).sum()), float((comm[1] - comm[0]).sum()), intersection_ns(comp, comm))
