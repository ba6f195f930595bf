"""The idle time between device activities, stream by stream (a stream of one device: two GPUs' stream 7
are two streams), by cause.

A gap on a stream is a stretch where none of its activities runs: from the furthest end of the activities
started so far to the next one's start (an activity overlapping the one before leaves no gap, and never a
negative one). Each gap is

- *host wait* when the runtime call that launched the next one started after the gap began: the CPU
  was not queueing work fast enough;
- *kernel wait* otherwise when the gap is shorter than :data:`KERNEL_WAIT_NS`: the device's own
  launch overhead between back-to-back kernels;
- *other* otherwise (waiting on another stream, a synchronisation...).

Holistic Trace Analysis's rules (its ``consecutive_kernel_delay`` is 30 in the trace's µs). Per stream
and cause: the idle time, its share, the number of gaps and their least, median, mean and largest.

A fold over the activities by stream then start (each stream numbered as a lane: device and stream;
:meth:`~layerperf.analysis.gpu.source.Activities.sort`), carrying the current lane and its furthest end
into the next block. Memory: per (lane, cause) a :class:`~layerperf.analysis.gpu.accumulate.Stats` group
with its median sketch, and the lanes' names.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from layerperf.analysis.gpu.accumulate import Keys, Stats, runs
from layerperf.analysis.gpu.source import Activities, activities
from layerperf.data.calls import KernelTable

HOST_WAIT, KERNEL_WAIT, OTHER = "host wait", "kernel wait", "other"
CAUSES = (HOST_WAIT, KERNEL_WAIT, OTHER)
KERNEL_WAIT_NS = 30_000.0
_PER_STREAM = 4  # key = lane * 4 + cause


@dataclass(frozen=True, slots=True)
class Gaps:
    """The gaps of one cause on one stream of one device (ns)."""

    device: str
    stream: int
    cause: str
    gaps: int
    idle_ns: float
    share: float | None  # of the stream's idle time
    min_ns: float | None
    median_ns: float | None
    mean_ns: float | None
    max_ns: float | None


GAP = np.dtype([("lane", np.int64), ("ts_ns", np.float64), ("end_ns", np.float64), ("launch_ns", np.float64)])


class Lanes:
    """A code per (device, stream), in the order they come; :meth:`named` gives them back."""

    def __init__(self) -> None:
        self.index: dict[tuple[str, int], int] = {}

    def codes(self, block: KernelTable) -> np.ndarray:
        device = block.device
        pairs = np.stack([device.codes.astype(np.int64), block.stream.astype(np.int64)], axis=1)
        uniq, inverse = np.unique(pairs, axis=0, return_inverse=True)
        dense = [self.index.setdefault((device.values[d], s), len(self.index)) for d, s in uniq.tolist()]
        return np.asarray(dense, dtype=np.int64)[inverse.reshape(-1)]

    def named(self) -> list[tuple[str, int]]:
        """(device, stream) by code."""
        return list(self.index)


def lane_order(device: str, stream: int) -> tuple[Any, ...]:
    """How streams are listed: by device, its numbers as numbers (GPU 2 before GPU 10), then stream."""
    return (*[int(p) if p.isdigit() else p for p in re.split(r"(\d+)", device)], stream)


def gaps(kernels: KernelTable | Activities, lanes: Lanes | None = None) -> Iterator[tuple[np.ndarray, ...]]:
    """Every gap, a block at a time: (lane, idle ns, cause index into :data:`CAUSES`), in lane then time
    order (``lanes`` names the lanes)."""
    src = activities(kernels)
    lanes = Lanes() if lanes is None else lanes

    def records() -> Iterator[np.ndarray]:
        for block in src.blocks():
            rec = np.empty(len(block), dtype=GAP)
            rec["lane"] = lanes.codes(block)
            rec["ts_ns"], rec["end_ns"], rec["launch_ns"] = block.ts_ns, block.ts_ns + block.dur_ns, block.launch_ts_ns
            yield rec

    last: tuple[int, float] | None = None  # the lane so far and its furthest end
    for block in src.sort(records(), "lane", "ts_ns"):
        lane, ts, launch = block["lane"], block["ts_ns"], block["launch_ns"]
        reach = np.empty(ts.size)  # each activity's lane's furthest end before it (NaN: its lane's first)
        for lo, hi in runs(lane):
            carried = last[1] if last is not None and last[0] == int(lane[lo]) else np.nan
            furthest = np.fmax.accumulate(np.concatenate([[carried], block["end_ns"][lo:hi]]))
            reach[lo:hi] = furthest[:-1]
            last = (int(lane[lo]), float(furthest[-1]))
        open_ = ts > reach  # NaN (a lane's first activity) compares False
        gap = ts[open_] - reach[open_]
        host = launch[open_] > reach[open_]  # NaN (launch unknown) compares False
        yield lane[open_], gap, np.where(host, 0, np.where(gap < KERNEL_WAIT_NS, 1, 2))


def idle(kernels: KernelTable | Activities) -> tuple[Gaps, ...]:
    """Per stream (device and stream) and cause, the idle gaps' statistics (causes with no gap left out)."""
    keys, stats, lanes = Keys(), Stats(medians=True), Lanes()
    for lanes_of, gap, cause in gaps(kernels, lanes):
        stats.add(keys.codes(lanes_of * _PER_STREAM + cause), gap)
    code = {k: c for c, k in enumerate(keys.keys)}
    named = lanes.named()
    out = []
    for lane in sorted({k // _PER_STREAM for k in code}, key=lambda ln: lane_order(*named[ln])):
        mine = [(c, code[lane * _PER_STREAM + c]) for c in range(len(CAUSES)) if lane * _PER_STREAM + c in code]
        total = sum(float(stats.total[g]) for _, g in mine)
        device, stream = named[lane]
        for c, g in mine:
            idle_ns = float(stats.total[g])
            out.append(Gaps(device, int(stream), CAUSES[c], int(stats.count[g]), idle_ns,
                            idle_ns / total if total else None, float(stats.least[g]), stats.median(g),
                            idle_ns / int(stats.count[g]), float(stats.most[g])))
    return tuple(out)
