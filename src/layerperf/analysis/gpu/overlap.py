"""How much of the device's communication time overlaps its computation.

Communication and computation are the unions of their kernels' intervals (all streams); the overlap is
the time both are running; its share is of the communication time (Holistic Trace Analysis's
``comm_comp_overlap``). A trace without communication kernels has no share (None).

A fold over the activities by start: three carried unions (computation, communication, and both
together), the overlap being |computation| + |communication| - |either|. Memory: a few numbers.
"""

from __future__ import annotations

from dataclasses import dataclass

from layerperf.analysis.gpu.intervals import COMMUNICATION, COMPUTATION, KINDS, Union, kind_codes
from layerperf.analysis.gpu.source import Activities, activities
from layerperf.data.calls import KernelTable


@dataclass(frozen=True, slots=True)
class Overlap:
    compute_ns: float
    communication_ns: float
    overlap_ns: float

    @property
    def share(self) -> float | None:
        return self.overlap_ns / self.communication_ns if self.communication_ns > 0 else None


def overlap(kernels: KernelTable | Activities) -> Overlap:
    comp, comm, either = Union(), Union(), Union()
    for block in activities(kernels).blocks("ts_ns"):
        kind = kind_codes(block)
        start, end = block.ts_ns, block.ts_ns + block.dur_ns
        is_comp, is_comm = kind == KINDS.index(COMPUTATION), kind == KINDS.index(COMMUNICATION)
        comp.add(start[is_comp], end[is_comp])
        comm.add(start[is_comm], end[is_comm])
        both = is_comp | is_comm
        either.add(start[both], end[both])
    return Overlap(comp.total_ns, comm.total_ns, comp.total_ns + comm.total_ns - either.total_ns)
