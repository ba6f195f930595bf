"""Device activities read a block at a time, in the order a view needs: what the GPU views fold over.

A view never holds every activity of a trace: it asks its :class:`Activities` for blocks sorted by some
columns (``blocks("stream", "ts_ns")``), folds each block into a few accumulators and carries across
block boundaries only what the next block needs (the last activity's end on a stream, the interval
still open). What a view must order that is not an activity (a queue's +1/-1 changes) it sorts through
:meth:`Activities.sort`. Every block of one source shares the same string tables (``name.values``,
``launcher.values``...), so a code means the same string in every block.

:class:`InMemory` serves a :class:`~layerperf.data.calls.KernelTable` already read (small traces, the
report, the tests: any block size, so that tests cut a trace at every boundary); the Kineto reader's
streamed source keeps the activities in sorted runs on disk
(:mod:`layerperf.readers.kineto_activities`). Sort keys: the first may be an integer column, the others
float columns; NaN sorts last; rows equal in every key keep the trace's order.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any, Protocol

import numpy as np

from layerperf.data.calls import KernelTable, Labels

BLOCK = 1 << 16  # activities per block from memory
_LABELS = ("name", "kind", "device", "launcher")
_NUMBERS = ("dur_ns", "ts_ns", "stream", "correlation", "launch_ts_ns", "launch_dur_ns", "bytes", "owner",
            "launch_thread")


class Activities(Protocol):
    """A trace's device activities, readable in any order a block at a time."""

    def __len__(self) -> int: ...

    def blocks(self, *by: str) -> Iterator[KernelTable]:
        """Every activity once, as tables of at most a block each, sorted by the columns ``by`` (most
        significant first; none: the trace's order)."""
        ...

    def sort(self, records: Iterable[np.ndarray], *by: str) -> Iterator[np.ndarray]:
        """``records`` (structured arrays of one dtype, in blocks) sorted by the fields ``by``, in blocks."""
        ...


def take(kernels: KernelTable, rows: np.ndarray | slice) -> KernelTable:
    """The activities at ``rows``, with the same string tables."""
    name, kind, device, launcher = (Labels(getattr(kernels, c).codes[rows], getattr(kernels, c).values)
                                    for c in _LABELS)
    return KernelTable(name, kind, device, launcher, **{c: getattr(kernels, c)[rows] for c in _NUMBERS})


def order(columns: list[np.ndarray]) -> np.ndarray:
    """The stable order that sorts rows by ``columns`` (most significant first), NaN last."""
    return np.lexsort(tuple(reversed(columns)))


class InMemory:
    """Activities read already, served in blocks of ``block``."""

    def __init__(self, kernels: KernelTable, block: int = BLOCK) -> None:
        self.kernels = kernels
        self.block = max(1, block)

    def __len__(self) -> int:
        return len(self.kernels)

    def blocks(self, *by: str) -> Iterator[KernelTable]:
        n = len(self.kernels)
        rows = order([getattr(self.kernels, c) for c in by]) if by else np.arange(n)
        for lo in range(0, n, self.block):
            yield take(self.kernels, rows[lo:lo + self.block])

    def sort(self, records: Iterable[np.ndarray], *by: str) -> Iterator[np.ndarray]:
        parts = [r for r in records if r.size]
        if not parts:
            return
        whole = np.concatenate(parts)
        if by:
            whole = whole[order([whole[f] for f in by])]
        for lo in range(0, whole.size, self.block):
            yield whole[lo:lo + self.block]


def activities(kernels: KernelTable | Activities) -> Activities:
    """``kernels`` as a source: a table read already is served from memory."""
    return InMemory(kernels) if isinstance(kernels, KernelTable) else kernels


def of(meta: dict[str, Any]) -> Activities | None:
    """The device activities a reader kept with a table (``meta``): on disk when it streamed them, else
    its kernel table; None for a trace without any."""
    streamed = meta.get("activities")
    if streamed is not None:
        return streamed if len(streamed) else None
    kernels = meta.get("kernels")
    return InMemory(kernels) if isinstance(kernels, KernelTable) and len(kernels) else None


def total_ns(source: Activities) -> float:
    """All the activities' device time (whole ns: exact in any order)."""
    return sum(float(b.dur_ns.sum()) for b in source.blocks())
