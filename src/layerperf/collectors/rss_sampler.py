"""Resident memory sampled while a model runs, and the samples mapped onto its nodes.

A background thread reads ``/proc/self/statm`` as fast as it can while the runtime computes with
the GIL released. Times are ``time.time_ns()`` — the system clock, the clock ONNX Runtime's
profiler measures from (its ``get_profiling_start_time_ns()`` is a ``system_clock`` time), so a
sample falls in the node whose profiler span holds it. Sample storage is allocated and touched
before the baseline reading, so the sampler does not grow the resident set it measures.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from types import TracebackType

import numpy as np

from layerperf.data.memory_report import RssSample
from layerperf.errors import InputError

STATM = "/proc/self/statm"
CAPACITY = 1 << 16


@dataclass(frozen=True, slots=True)
class RunWindows:
    """One run's extent and its nodes' start times, absolute ns on the sampler's clock."""

    start_ns: int
    end_ns: int
    node_starts_ns: tuple[int, ...]
    nodes: tuple[int, ...]  # the profile layer index of each node, in the same order


def check_available() -> None:
    if not os.access(STATM, os.R_OK):
        raise InputError(f"resident-memory sampling needs {STATM} (Linux)", hint="use --sample-rate 0")


class RssSampler:
    """``with RssSampler() as s: run()``; then ``s.times_ns``, ``s.rss_bytes``, ``s.hwm_bytes``."""

    def __init__(self, capacity: int = CAPACITY) -> None:
        check_available()
        self._page = os.sysconf("SC_PAGE_SIZE")
        self._fd = os.open(STATM, os.O_RDONLY)
        # Two buffers of each kind, so thinning out a full one copies without allocating.
        self._t = [np.ones(capacity, dtype=np.int64) for _ in range(2)]
        self._r = [np.ones(capacity, dtype=np.int64) for _ in range(2)]
        self._n = 0
        self._stride = 1
        self._stop = False
        self.baseline_bytes = 0
        self.hwm_bytes = 0
        self._thread = threading.Thread(target=self._loop, name="layerperf-rss", daemon=True)

    def read(self) -> int:
        return int(os.pread(self._fd, 128, 0).split()[1]) * self._page

    def _thin(self) -> None:
        half = self._n // 2
        for bufs in (self._t, self._r):
            bufs[1][:half] = bufs[0][: 2 * half : 2]
            bufs.reverse()
        self._n = half
        self._stride *= 2

    def _loop(self) -> None:
        read, clock, count = self.read, time.time_ns, 0
        while not self._stop:
            rss = read()
            t = clock()
            self.hwm_bytes = max(self.hwm_bytes, rss)
            count += 1
            if count % self._stride:
                continue
            if self._n == len(self._t[0]):
                self._thin()
            self._t[0][self._n] = t
            self._r[0][self._n] = rss
            self._n += 1

    def __enter__(self) -> RssSampler:
        self.baseline_bytes = self.hwm_bytes = self.read()
        self._thread.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self._stop = True
        self._thread.join()
        self.hwm_bytes = max(self.hwm_bytes, self.read())
        os.close(self._fd)

    @property
    def times_ns(self) -> np.ndarray:
        return self._t[0][: self._n].copy()

    @property
    def rss_bytes(self) -> np.ndarray:
        return self._r[0][: self._n].copy()


def per_node(times_ns: np.ndarray, rss_bytes: np.ndarray, baseline_bytes: int, runs: Sequence[RunWindows],
             every: int) -> list[RssSample]:
    """One sample for every ``every``-th node of each run: the last reading before the next node began.

    A node too short to hold a reading gets the latest one before it. The high-water mark is the
    largest reading (or the baseline) up to that sample, so it never decreases.
    """
    if every < 1 or times_ns.size == 0:
        return []
    hwm = np.maximum.accumulate(np.maximum(rss_bytes, baseline_bytes))
    out: list[RssSample] = []
    for r, run in enumerate(runs):
        ends = list(run.node_starts_ns[1:]) + [run.end_ns]
        for k in range(0, len(run.nodes), every):
            i = int(np.searchsorted(times_ns, ends[k], side="left")) - 1
            if i < 0:
                t, rss, mark = run.start_ns, baseline_bytes, baseline_bytes
            else:
                t, rss, mark = int(times_ns[i]), int(rss_bytes[i]), int(hwm[i])
            out.append(RssSample(r, run.nodes[k], max(0, t - run.start_ns), rss, mark))
    return out
