"""Copies and sets on the device: by direction, what they moved and at what bandwidth, over time.

A memory activity's direction is the start of its name (``Memcpy HtoD``, ``Memcpy DtoH``, ``Memcpy
DtoD``, ``Memset``), as Holistic Trace Analysis groups them; its bandwidth the bytes the trace records
for it over its duration. Per direction: count, bytes, time, mean bandwidth (bytes over summed time)
and the peak of the bandwidth summed over concurrent activities. Over time: the trace's span cut in
:data:`BUCKETS` equal buckets, each with the bytes of each direction moved in it (an activity's bytes
spread evenly over its duration) over the bucket's length.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from layerperf.analysis.gpu.intervals import MEMORY, kinds
from layerperf.data.calls import KernelTable

BUCKETS = 20


def direction(name: str) -> str:
    if name.startswith("Memset"):
        return "Memset"
    return name[:11] if name.startswith("Memcpy") else "Memcpy Unknown"


@dataclass(frozen=True, slots=True)
class Direction:
    direction: str
    calls: int
    bytes: float | None  # None: the trace records no size
    total_ns: float
    bandwidth_bytes_per_s: float | None
    peak_bytes_per_s: float | None


@dataclass(frozen=True, slots=True)
class Memcpy:
    directions: tuple[Direction, ...]
    bucket_start_ns: tuple[float, ...]
    bucket_ns: float
    bucket_bytes_per_s: dict[str, tuple[float, ...]]  # direction -> per bucket


def memcpy(kernels: KernelTable, buckets: int = BUCKETS) -> Memcpy:
    rows = np.flatnonzero(kinds(kernels) == MEMORY)
    names = kernels.name.tolist()
    dirs = np.asarray([direction(names[i]) for i in rows.tolist()], dtype=object)
    start, dur, size = kernels.ts_ns[rows], kernels.dur_ns[rows], kernels.bytes[rows]
    out = []
    for d in sorted(set(dirs.tolist())):
        mine = dirs == d
        known = ~np.isnan(size[mine])
        moved = float(size[mine][known].sum()) if known.any() else None
        time_ns = float(dur[mine].sum())
        bw = moved / time_ns * 1e9 if moved is not None and time_ns > 0 else None
        out.append(Direction(d, int(mine.sum()), moved, time_ns, bw, _peak(start[mine], dur[mine], size[mine])))
    span0 = float(kernels.ts_ns.min()) if len(kernels) else 0.0
    span1 = float((kernels.ts_ns + kernels.dur_ns).max()) if len(kernels) else 0.0
    width = (span1 - span0) / buckets if span1 > span0 else 0.0
    edges = span0 + width * np.arange(buckets + 1)
    per: dict[str, tuple[float, ...]] = {}
    for d in sorted(set(dirs.tolist())):
        mine = (dirs == d) & ~np.isnan(size)
        per[d] = tuple(_spread(start[mine], dur[mine], size[mine], edges) / (width * 1e-9) if width else
                       np.zeros(buckets))
    return Memcpy(tuple(out), tuple(edges[:-1].tolist()), width, per)


def _peak(start: np.ndarray, dur: np.ndarray, size: np.ndarray) -> float | None:
    """The largest bandwidth summed over activities running at once (bytes/s)."""
    ok = ~np.isnan(size) & (dur > 0)
    if not ok.any():
        return None
    bw = size[ok] / dur[ok] * 1e9
    ts = np.concatenate([start[ok], start[ok] + dur[ok]])
    step = np.concatenate([bw, -bw])
    order = np.lexsort((step, ts))  # an end before a start at the same time
    return float(np.cumsum(step[order]).max())


def _spread(start: np.ndarray, dur: np.ndarray, size: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """Bytes per bucket, each activity's spread evenly over its duration (all in a bucket if 0 long)."""
    out = np.zeros(edges.size - 1)
    for s, d, b in zip(start.tolist(), dur.tolist(), size.tolist(), strict=True):
        if d <= 0:
            k = min(max(int(np.searchsorted(edges, s, side="right")) - 1, 0), out.size - 1)
            out[k] += b
            continue
        lo = np.clip(edges[:-1], s, s + d)
        hi = np.clip(edges[1:], s, s + d)
        out += (hi - lo) / d * b
    return out
