"""The launch queue of each stream: how many launched activities wait to start, over time.

The length goes up by one when a runtime call launches an activity (at the call's start) and down by
one when the activity starts on the device (Holistic Trace Analysis's definition). Per stream: the
number of changes, the least, largest and mean length over the changes, the mean weighted by time,
and the time spent with the queue at or above :data:`MAX_QUEUE` — CUDA's launch queue holds 1024
entries, and a CPU thread that finds it full blocks until one starts.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from layerperf.data.calls import KernelTable

MAX_QUEUE = 1024


@dataclass(frozen=True, slots=True)
class QueueStats:
    stream: int
    changes: int
    min_length: int
    max_length: int
    mean_length: float  # over the changes
    time_mean_length: float | None  # weighted by how long each length lasted
    full_ns: float  # time at or above MAX_QUEUE


def series(kernels: KernelTable, stream: int) -> tuple[np.ndarray, np.ndarray]:
    """One stream's queue length after each change: (time ns, length), in time order (a launch before
    a start at the same time)."""
    mine = (kernels.stream == stream) & ~np.isnan(kernels.launch_ts_ns)
    up, down = kernels.launch_ts_ns[mine], kernels.ts_ns[mine]
    ts = np.concatenate([up, down])
    step = np.concatenate([np.ones(up.size, dtype=np.int64), -np.ones(down.size, dtype=np.int64)])
    order = np.lexsort((-step, ts))
    return ts[order], np.cumsum(step[order])


def queues(kernels: KernelTable, max_queue: int = MAX_QUEUE) -> tuple[QueueStats, ...]:
    out = []
    for s in np.unique(kernels.stream).tolist():
        ts, length = series(kernels, int(s))
        if not ts.size:
            continue
        lasts = np.diff(ts)
        span = float(ts[-1] - ts[0])
        weighted = float((length[:-1] * lasts).sum()) / span if span > 0 else None
        full = float(lasts[length[:-1] >= max_queue].sum())
        out.append(QueueStats(int(s), int(ts.size), int(length.min()), int(length.max()), float(length.mean()),
                              weighted, full))
    return tuple(out)
