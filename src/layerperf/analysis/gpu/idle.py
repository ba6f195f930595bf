"""The idle time between device activities, stream by stream, by cause.

Each gap between an activity's end and the next one's start on the same stream is

- *host wait* when the runtime call that launched the next one started after the gap began: the CPU
  was not queueing work fast enough;
- *kernel wait* otherwise when the gap is shorter than :data:`KERNEL_WAIT_NS`: the device's own
  launch overhead between back-to-back kernels;
- *other* otherwise (waiting on another stream, a synchronisation...).

Holistic Trace Analysis's rules (its ``consecutive_kernel_delay`` is 30 in the trace's µs). Per stream
and cause: the idle time, its share, the number of gaps and their least, median, mean and largest.

A fold over the activities by stream then start (``blocks("stream", "ts_ns")``), carrying the last
activity's stream and end into the next block. Memory: per (stream, cause) a
:class:`~layerperf.analysis.gpu.accumulate.Stats` group with its median sketch.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from layerperf.analysis.gpu.accumulate import Keys, Stats
from layerperf.analysis.gpu.source import Activities, activities
from layerperf.data.calls import KernelTable

HOST_WAIT, KERNEL_WAIT, OTHER = "host wait", "kernel wait", "other"
CAUSES = (HOST_WAIT, KERNEL_WAIT, OTHER)
KERNEL_WAIT_NS = 30_000.0
_PER_STREAM = 4  # key = stream * 4 + cause


@dataclass(frozen=True, slots=True)
class Gaps:
    """The gaps of one cause on one stream (ns)."""

    stream: int
    cause: str
    gaps: int
    idle_ns: float
    share: float | None  # of the stream's idle time
    min_ns: float | None
    median_ns: float | None
    mean_ns: float | None
    max_ns: float | None


def gaps(kernels: KernelTable | Activities) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """Every gap, a block at a time: (stream, idle ns, cause index into :data:`CAUSES`), in stream then
    time order."""
    last: tuple[int, float] | None = None  # the previous block's last activity: stream, end
    for block in activities(kernels).blocks("stream", "ts_ns"):
        if not len(block):
            continue
        stream, ts = block.stream, block.ts_ns
        end = ts + block.dur_ns
        prev_stream = np.concatenate([[last[0] if last else 0], stream[:-1]])
        prev_end = np.concatenate([[last[1] if last else np.nan], end[:-1]])
        same = prev_stream == stream
        same[0] &= last is not None
        gap = ts[same] - prev_end[same]
        host = block.launch_ts_ns[same] > prev_end[same]  # NaN (launch unknown) compares False
        yield stream[same], gap, np.where(host, 0, np.where(gap < KERNEL_WAIT_NS, 1, 2))
        last = (int(stream[-1]), float(end[-1]))


def idle(kernels: KernelTable | Activities) -> tuple[Gaps, ...]:
    """Per stream and cause, the idle gaps' statistics (causes with no gap left out)."""
    keys, stats = Keys(), Stats(medians=True)
    for stream, gap, cause in gaps(kernels):
        stats.add(keys.codes(stream * _PER_STREAM + cause), gap)
    code = {k: c for c, k in enumerate(keys.keys)}
    out = []
    for s in sorted({k // _PER_STREAM for k in code}):
        mine = [(c, code[s * _PER_STREAM + c]) for c in range(len(CAUSES)) if s * _PER_STREAM + c in code]
        total = sum(float(stats.total[g]) for _, g in mine)
        for c, g in mine:
            idle_ns = float(stats.total[g])
            out.append(Gaps(int(s), CAUSES[c], int(stats.count[g]), idle_ns, idle_ns / total if total else None,
                            float(stats.least[g]), stats.median(g), idle_ns / int(stats.count[g]),
                            float(stats.most[g])))
    return tuple(out)
