"""The idle time between device activities, stream by stream, by cause.

Each gap between an activity's end and the next one's start on the same stream is

- *host wait* when the runtime call that launched the next one started after the gap began: the CPU
  was not queueing work fast enough;
- *kernel wait* otherwise when the gap is shorter than :data:`KERNEL_WAIT_NS`: the device's own
  launch overhead between back-to-back kernels;
- *other* otherwise (waiting on another stream, a synchronisation...).

Holistic Trace Analysis's rules (its ``consecutive_kernel_delay`` is 30 in the trace's µs). Per stream
and cause: the idle time, its share, the number of gaps and their least, median, mean and largest.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from layerperf.data.calls import KernelTable

HOST_WAIT, KERNEL_WAIT, OTHER = "host wait", "kernel wait", "other"
CAUSES = (HOST_WAIT, KERNEL_WAIT, OTHER)
KERNEL_WAIT_NS = 30_000.0


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


def gaps(kernels: KernelTable) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every gap: (stream, idle ns, cause index into :data:`CAUSES`), in stream then time order."""
    order = np.lexsort((kernels.ts_ns, kernels.stream))
    stream, ts = kernels.stream[order], kernels.ts_ns[order]
    end = ts + kernels.dur_ns[order]
    launch = kernels.launch_ts_ns[order]
    same = stream[1:] == stream[:-1]
    prev_end = end[:-1][same]
    gap = ts[1:][same] - prev_end
    host = launch[1:][same] > prev_end  # NaN (launch unknown) compares False
    cause = np.where(host, 0, np.where(gap < KERNEL_WAIT_NS, 1, 2))
    return stream[1:][same], gap, cause


def idle(kernels: KernelTable) -> tuple[Gaps, ...]:
    """Per stream and cause, the idle gaps' statistics (causes with no gap left out)."""
    stream, gap, cause = gaps(kernels)
    out = []
    for s in np.unique(stream).tolist():
        mine = stream == s
        total = float(gap[mine].sum())
        for c, name in enumerate(CAUSES):
            g = gap[mine & (cause == c)]
            if not g.size:
                continue
            out.append(Gaps(int(s), name, int(g.size), float(g.sum()), float(g.sum()) / total if total else None,
                            float(g.min()), float(np.median(g)), float(g.mean()), float(g.max())))
    return tuple(out)
