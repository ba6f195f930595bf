"""Copies and sets on the device: by direction, what they moved and at what bandwidth, over time.

A memory activity's direction is the start of its name (``Memcpy HtoD``, ``Memcpy DtoH``, ``Memcpy
DtoD``, ``Memset``), as Holistic Trace Analysis groups them; its bandwidth the bytes the trace records
for it over its duration. Per direction: count, bytes, time, mean bandwidth (bytes over summed time)
and the peak of the bandwidth summed over concurrent activities. Over time: the trace's span cut in
:data:`BUCKETS` equal buckets, each with the bytes of each direction moved in it (an activity's bytes
spread evenly over its duration) over the bucket's length.

Three passes over the activities. The first (any order) finds the span and sums each direction's
count, bytes and time; the second sorts each sized copy's start (+bandwidth) and end (-bandwidth)
through the source and sweeps them with the running sum carried; the third spreads each copy's bytes
over the buckets, which the span fixes. Memory: a few numbers per direction and per bucket.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from layerperf.analysis.gpu.accumulate import runs
from layerperf.analysis.gpu.intervals import MEMORY, kind_of
from layerperf.analysis.gpu.source import Activities, activities
from layerperf.data.calls import KernelTable

BUCKETS = 20
BANDWIDTH = np.dtype([("direction", np.int64), ("ts_ns", np.float64), ("step", np.float64)])


def direction(name: str) -> str:
    if name.startswith("Memset"):
        return "Memset"
    return name[:11] if name.startswith("Memcpy") else "Memcpy Unknown"


@dataclass(frozen=True, slots=True)
class Direction:
    direction: str
    calls: int
    bytes: int | float | None  # a count of bytes (float only where a trace records a fraction); None: no size
    total_ns: float
    bandwidth_bytes_per_s: float | None
    peak_bytes_per_s: float | None


@dataclass(frozen=True, slots=True)
class Memcpy:
    directions: tuple[Direction, ...]
    bucket_start_ns: tuple[float, ...]
    bucket_ns: float
    bucket_bytes_per_s: dict[str, tuple[float, ...]]  # direction -> per bucket


@functools.lru_cache(maxsize=8)
def _directions(names: tuple[str, ...]) -> tuple[tuple[str, ...], np.ndarray]:
    # every block shares its name table: the directions (sorted) and each name's index in them (-1: no copy)
    per_name = [direction(n) if kind_of(n) == MEMORY else None for n in names]
    found = tuple(sorted({d for d in per_name if d is not None}))
    return found, np.asarray([found.index(d) if d is not None else -1 for d in per_name], dtype=np.int64)


def _memory(block: KernelTable) -> tuple[tuple[str, ...], np.ndarray, np.ndarray]:
    """(the source's directions, the block's copies' rows, their direction index)."""
    found, per_name = _directions(block.name.values)
    d = per_name[block.name.codes] if len(block) else np.zeros(0, dtype=np.int64)
    rows = np.flatnonzero(d >= 0)
    return found, rows, d[rows]


class _Totals:
    """The first pass: the span and each direction's count, sized bytes and time."""

    def __init__(self, src: Activities) -> None:
        self.first_ns, self.last_ns = math.inf, -math.inf
        self.names: tuple[str, ...] = ()
        self.calls, self.sized = np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
        self.time_ns, self.bytes = np.zeros(0), np.zeros(0)
        for block in src.blocks():
            if not len(block):
                continue
            self.first_ns = min(self.first_ns, float(block.ts_ns.min()))
            self.last_ns = max(self.last_ns, float((block.ts_ns + block.dur_ns).max()))
            self.names, rows, d = _memory(block)
            self._add(block, rows, d)

    def _add(self, block: KernelTable, rows: np.ndarray, d: np.ndarray) -> None:
        n = len(self.names)  # the same in every block: they share the name table
        if self.calls.size < n:
            self.calls, self.sized = np.zeros(n, dtype=np.int64), np.zeros(n, dtype=np.int64)
            self.time_ns, self.bytes = np.zeros(n), np.zeros(n)
        size = block.bytes[rows]
        known = ~np.isnan(size)
        self.calls += np.bincount(d, minlength=n)
        self.time_ns += np.bincount(d, weights=block.dur_ns[rows], minlength=n)
        self.bytes += np.bincount(d[known], weights=size[known], minlength=n)
        self.sized += np.bincount(d[known], minlength=n)

    def direction(self, k: int, peak: float | None) -> Direction:
        total = float(self.bytes[k])
        moved = (int(total) if total.is_integer() else total) if self.sized[k] else None
        time_ns = float(self.time_ns[k])
        bw = moved / time_ns * 1e9 if moved is not None and time_ns > 0 else None
        return Direction(self.names[k], int(self.calls[k]), moved, time_ns, bw, peak)


def memcpy(kernels: KernelTable | Activities, buckets: int = BUCKETS) -> Memcpy:
    src = activities(kernels)
    totals = _Totals(src)
    peaks = _peaks(src)
    out = tuple(totals.direction(k, peaks.get(k)) for k in range(len(totals.names)))
    span0 = totals.first_ns if len(src) else 0.0
    span1 = totals.last_ns if len(src) else 0.0
    width = (span1 - span0) / buckets if span1 > span0 else 0.0
    edges = span0 + width * np.arange(buckets + 1)
    spread = _spread(src, edges, len(totals.names)) if width else np.zeros((len(totals.names), buckets))
    per = {d: tuple(spread[k] / (width * 1e-9) if width else spread[k]) for k, d in enumerate(totals.names)}
    return Memcpy(out, tuple(edges[:-1].tolist()), width, per)


def _sized(block: KernelTable) -> tuple[np.ndarray, np.ndarray]:
    """The block's copies with a known size: (rows, direction index)."""
    _, rows, d = _memory(block)
    known = ~np.isnan(block.bytes[rows])
    return rows[known], d[known]


def _bandwidth_changes(src: Activities) -> Iterator[np.ndarray]:
    for block in src.blocks():
        rows, d = _sized(block)
        dur = block.dur_ns[rows]
        rows, d, dur = rows[dur > 0], d[dur > 0], dur[dur > 0]
        bw = block.bytes[rows] / dur * 1e9
        out = np.empty(2 * rows.size, dtype=BANDWIDTH)
        out["direction"] = np.tile(d, 2)
        out["ts_ns"] = np.concatenate([block.ts_ns[rows], block.ts_ns[rows] + dur])
        out["step"] = np.concatenate([bw, -bw])
        yield out


def _peaks(src: Activities) -> dict[int, float]:
    """Per direction with a sized, timed copy: the largest bandwidth summed over copies running at once
    (bytes/s); an end comes before a start at the same time."""
    peak: dict[int, float] = {}
    running: dict[int, float] = {}
    for block in src.sort(_bandwidth_changes(src), "direction", "ts_ns", "step"):
        d = block["direction"]
        for lo, hi in runs(d):
            k = int(d[lo])
            level = np.cumsum(np.concatenate([[running.get(k, 0.0)], block["step"][lo:hi]]))[1:]
            running[k] = float(level[-1])
            peak[k] = max(peak.get(k, -math.inf), float(level.max()))
    return peak


def _spread(src: Activities, edges: np.ndarray, directions: int) -> np.ndarray:
    """Bytes per direction and bucket, each copy's spread evenly over its duration (all in a bucket if
    0 long); summed copy after copy in the trace's order."""
    out = np.zeros((directions, edges.size - 1))
    for block in src.blocks():
        rows, d = _sized(block)
        s, dur, b = block.ts_ns[rows], block.dur_ns[rows], block.bytes[rows]
        part = np.zeros((rows.size, edges.size - 1))
        timed = dur > 0
        lo = np.clip(edges[:-1], s[timed, None], (s + dur)[timed, None])
        hi = np.clip(edges[1:], s[timed, None], (s + dur)[timed, None])
        part[timed] = (hi - lo) / dur[timed, None] * b[timed, None]
        at = np.clip(np.searchsorted(edges, s[~timed], side="right") - 1, 0, out.shape[1] - 1)
        part[np.flatnonzero(~timed), at] = b[~timed]
        for k in np.unique(d).tolist():
            out[k] = np.cumsum(np.vstack([out[k], part[d == k]]), axis=0)[-1]
    return out
