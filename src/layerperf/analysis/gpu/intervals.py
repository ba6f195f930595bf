"""Interval arithmetic over device activities read in order of their starts, and their kinds (shared by
the GPU views).

:class:`Union` folds intervals given by ascending start, block after block: it carries only the
interval still open (its start and reach) and the length of those closed, so the union of any number
of activities costs a few numbers. :class:`Windows` tells which step window each activity of a block
falls in.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Iterator, Sequence

import numpy as np

from layerperf.data.calls import KernelTable

COMMUNICATION, MEMORY, COMPUTATION, OTHER = "communication", "memory", "computation", "other"
KINDS = (COMPUTATION, MEMORY, COMMUNICATION, OTHER)
_COMM = re.compile(r"^nccl.*Kernel")
_MEMORY = re.compile(r"(^Memcpy)|(^Memset)|(^dma)")
_NOT_COMPUTE = re.compile(r"(^nccl.*Kernel)|(.*(Memcpy)|(Memset))|(.*Sync)")


def kind_of(name: str) -> str:
    """A kernel's kind by its name (Holistic Trace Analysis's rules, so that figures compare)."""
    if _COMM.match(name):
        return COMMUNICATION
    if _MEMORY.match(name):
        return MEMORY
    return OTHER if _NOT_COMPUTE.match(name) else COMPUTATION


@functools.lru_cache(maxsize=8)
def _kind_per_name(values: tuple[str, ...]) -> np.ndarray:
    # every block of a source shares its name table: classify the names once, not once per block
    return np.asarray([KINDS.index(kind_of(n)) for n in values], dtype=np.int64)


def kind_codes(kernels: KernelTable) -> np.ndarray:
    """The kind of every activity, as an index into :data:`KINDS`."""
    if not len(kernels):
        return np.zeros(0, dtype=np.int64)
    return _kind_per_name(kernels.name.values)[kernels.name.codes]


def kinds(kernels: KernelTable) -> np.ndarray:
    """The kind of every activity (object array of the :data:`KINDS` strings)."""
    return np.asarray(KINDS, dtype=object)[kind_codes(kernels)]


def step_time(kernels: KernelTable) -> np.ndarray:
    """When an activity belongs to a step: when it was launched (known), else when it started."""
    return np.where(np.isnan(kernels.launch_ts_ns), kernels.ts_ns, kernels.launch_ts_ns)


class Union:
    """The union of intervals fed in order of their starts, with their count, least start and largest end.

    Carried between blocks: the open interval (start, reach) and the closed intervals' summed length.
    Touching intervals merge, as Holistic Trace Analysis merges them.
    """

    __slots__ = ("closed_ns", "count", "first_ns", "last_ns", "open_end", "open_start")

    def __init__(self) -> None:
        self.closed_ns = 0.0
        self.open_start, self.open_end = math.nan, -math.inf
        self.first_ns, self.last_ns = math.inf, -math.inf
        self.count = 0

    def add(self, start: np.ndarray, end: np.ndarray) -> None:
        """Fold intervals whose starts ascend and come at or after every start fed before."""
        if not start.size:
            return
        reach = np.maximum.accumulate(np.concatenate([[self.open_end], end]))
        before = reach[:-1]
        new = start > before
        opens = np.concatenate([[self.open_start], start[new]])
        closed = before[new] - opens[:-1]
        self.closed_ns += float((closed[1:] if not self.count else closed).sum())
        self.open_start, self.open_end = float(opens[-1]), float(reach[-1])
        self.first_ns = min(self.first_ns, float(start[0]))
        self.last_ns = max(self.last_ns, float(end.max()))
        self.count += int(start.size)

    @property
    def total_ns(self) -> float:
        """The union's length."""
        return self.closed_ns + (self.open_end - self.open_start) if self.count else 0.0

    @property
    def span_ns(self) -> float:
        """From the least start to the largest end."""
        return self.last_ns - self.first_ns if self.count else 0.0


class Windows:
    """(start, end) windows, ns; an activity is in a window when its time t has start <= t < end."""

    def __init__(self, windows: Sequence[tuple[float, float]]) -> None:
        self.windows = list(windows)
        starts = np.asarray([s for s, _ in self.windows], dtype=np.float64)
        self.order = np.argsort(starts, kind="stable")
        self.starts = starts[self.order]
        self.ends = np.asarray([e for _, e in self.windows], dtype=np.float64)[self.order]
        self.disjoint = bool((self.starts[1:] >= self.ends[:-1]).all())

    def split(self, times: np.ndarray) -> Iterator[tuple[int, np.ndarray]]:
        """Each window holding any of ``times``: its index and those rows (ascending)."""
        if not self.disjoint:  # overlapping windows: a row may be in several, test each window
            for k, (s, e) in enumerate(self.windows):
                rows = np.flatnonzero((times >= s) & (times < e))
                if rows.size:
                    yield k, rows
            return
        at = np.searchsorted(self.starts, times, side="right") - 1
        inside = (at >= 0) & (times < self.ends[np.maximum(at, 0)])
        rows = np.flatnonzero(inside)
        if not rows.size:
            return
        rows = rows[np.argsort(at[rows], kind="stable")]
        slots, firsts = np.unique(at[rows], return_index=True)
        for slot, lo, hi in zip(slots.tolist(), firsts.tolist(), [*firsts[1:].tolist(), rows.size], strict=True):
            yield int(self.order[slot]), rows[lo:hi]
