"""The launch queue of each stream: how many launched activities wait to start, over time.

The length goes up by one when a runtime call launches an activity (at the call's start) and down by
one when the activity starts on the device (Holistic Trace Analysis's definition). Per stream: the
number of changes, the least, largest and mean length over the changes, the mean weighted by time,
and the time spent with the queue at or above :data:`MAX_QUEUE` — CUDA's launch queue holds 1024
entries, and a CPU thread that finds it full blocks until one starts.

Each activity with a known launch makes two changes (stream, time, -step); the source sorts them by
stream, time, then a launch before a start at the same time (:meth:`Activities.sort`), and a sweep
carries the current stream's length, first and last change time and running sums into the next
block. A stream is a device's: two GPUs' stream 7 are two queues. Memory: one stream's carried figures
and the finished streams' figures.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from layerperf.analysis.gpu.accumulate import runs
from layerperf.analysis.gpu.idle import Lanes, lane_order
from layerperf.analysis.gpu.source import Activities, activities
from layerperf.data.calls import KernelTable

MAX_QUEUE = 1024
CHANGE = np.dtype([("lane", np.int64), ("ts_ns", np.float64), ("down", np.float64)])  # down: -step


@dataclass(frozen=True, slots=True)
class QueueStats:
    device: str
    stream: int
    changes: int
    min_length: int
    max_length: int
    mean_length: float  # over the changes
    time_mean_length: float | None  # weighted by how long each length lasted
    full_ns: float  # time at or above MAX_QUEUE


def changes(src: Activities, lanes: Lanes) -> Iterator[np.ndarray]:
    """The queue's changes, a block of activities at a time, unsorted (each stream of each device a lane)."""
    for block in src.blocks():
        known = ~np.isnan(block.launch_ts_ns)
        n = int(known.sum())
        out = np.empty(2 * n, dtype=CHANGE)
        out["lane"] = np.tile(lanes.codes(block)[known], 2)
        out["ts_ns"] = np.concatenate([block.launch_ts_ns[known], block.ts_ns[known]])
        out["down"] = np.repeat([-1.0, 1.0], n)
        yield out


class _Stream:
    """One stream's sweep so far."""

    def __init__(self, lane: int, ts_ns: float) -> None:
        self.lane, self.first_ns, self.last_ns = lane, ts_ns, ts_ns
        self.length = self.changes = self.length_sum = 0
        self.least, self.most = np.iinfo(np.int64).max, np.iinfo(np.int64).min
        self.weighted = self.full_ns = 0.0

    def add(self, ts: np.ndarray, down: np.ndarray, max_queue: int) -> None:
        """Fold the next changes of this stream, in order."""
        length = self.length - np.cumsum(down.astype(np.int64))
        before = np.concatenate([[self.length], length[:-1]])
        lasts = np.diff(np.concatenate([[self.last_ns], ts]))
        if not self.changes:  # the first change has nothing before it
            before, lasts = before[1:], lasts[1:]
        self.weighted += float((before * lasts).sum())
        self.full_ns += float(lasts[before >= max_queue].sum())
        self.length, self.last_ns = int(length[-1]), float(ts[-1])
        self.changes += int(ts.size)
        self.length_sum += int(length.sum())
        self.least, self.most = min(self.least, int(length.min())), max(self.most, int(length.max()))

    def result(self, named: list[tuple[str, int]]) -> QueueStats:
        span = self.last_ns - self.first_ns
        device, stream = named[self.lane]
        return QueueStats(device, stream, self.changes, self.least, self.most, self.length_sum / self.changes,
                          self.weighted / span if span > 0 else None, self.full_ns)


def queues(kernels: KernelTable | Activities, max_queue: int = MAX_QUEUE) -> tuple[QueueStats, ...]:
    """Per stream (device and stream), its launch queue's figures."""
    src, lanes = activities(kernels), Lanes()
    done: list[_Stream] = []
    current: _Stream | None = None
    for block in src.sort(changes(src, lanes), "lane", "ts_ns", "down"):
        lane = block["lane"]
        for lo, hi in runs(lane):
            if current is None or current.lane != int(lane[lo]):
                if current is not None:
                    done.append(current)
                current = _Stream(int(lane[lo]), float(block["ts_ns"][lo]))
            current.add(block["ts_ns"][lo:hi], block["down"][lo:hi], max_queue)
    if current is not None:
        done.append(current)
    named = lanes.named()
    return tuple(sorted((s.result(named) for s in done), key=lambda q: lane_order(q.device, q.stream)))
