"""Counter groups sampled on threads: every ``period_ns`` of a thread's own CPU time (task-clock) the
kernel writes the group's counts, the thread and the time into a ring buffer mapped here; reading the
samples back gives each thread's counts as steps in time, to be laid over intervals recorded elsewhere
on the same clock (an ONNX Runtime profiler's node events: :func:`attribute`).

Why: counts of the real run, on its own threads, without running anything node by node. The price is
granularity: a delta between two samples is spread over the intervals it overlaps in proportion to the
overlap (exact for task-clock while the thread runs, an approximation for other events), so one run
knows a node's counts to within a period at each of its ends; many runs average that out.

Software events only need perf_event_paranoid <= 2 for the process's own threads. The sample times are
CLOCK_REALTIME, the clock ONNX Runtime's profiler timestamps come from.
"""

from __future__ import annotations

import mmap
import os
import struct
from collections.abc import Sequence
from dataclasses import dataclass, field

from layerperf.counters import abi
from layerperf.counters._open import close_all, exclusion_for, make_attr
from layerperf.counters.event import EventSpec
from layerperf.counters.perms import current_privilege
from layerperf.errors import CounterError

RING_PAGES = 256  # per thread: ~1 MiB, some 20,000 samples between two drains


@dataclass(slots=True)
class Samples:
    """One thread's samples: times (ns, CLOCK_REALTIME) and the group's cumulative counts at each."""

    tid: int
    times_ns: list[int] = field(default_factory=list)
    counts: list[tuple[int, ...]] = field(default_factory=list)
    lost: int = 0


class _Ring:
    def __init__(self, fd: int, pages: int) -> None:
        self.page = mmap.PAGESIZE
        self.size = pages * self.page
        self.map = mmap.mmap(fd, self.page + self.size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)

    def take(self) -> bytes:
        """Every byte written since the last take; the kernel may write there again."""
        head = struct.unpack_from("<Q", self.map, abi.MMAP_DATA_HEAD)[0]
        tail = struct.unpack_from("<Q", self.map, abi.MMAP_DATA_TAIL)[0]
        if head == tail:
            return b""
        start, end = self.page + tail % self.size, self.page + head % self.size
        data = self.map[start:end] if end > start else self.map[start:self.page + self.size] + self.map[self.page:end]
        struct.pack_into("<Q", self.map, abi.MMAP_DATA_TAIL, head)
        return data

    def close(self) -> None:
        self.map.close()


class SampledGroup:
    """``specs`` (software events) opened as one group on each of ``tids``, the first sampled every
    ``period_ns`` of its count (task-clock: ns of CPU time), each sample reading the whole group."""

    def __init__(self, specs: Sequence[EventSpec], tids: Sequence[int], period_ns: int) -> None:
        self.names = tuple(s.name for s in specs)
        self.samples = {tid: Samples(tid) for tid in tids}
        self._fds: list[int] = []
        self._rings: dict[int, tuple[int, _Ring]] = {}
        self._priv = current_privilege()
        try:
            for tid in tids:
                leader = self._open(specs[0], tid, -1, period_ns)
                for spec in specs[1:]:
                    self._open(spec, tid, leader, 0)
                self._rings[tid] = (leader, _Ring(leader, RING_PAGES))
        except OSError as exc:
            self.close()
            raise CounterError(f"cannot sample {', '.join(self.names)} on the session's threads: {exc.strerror}",
                               hint="software events need kernel.perf_event_paranoid <= 2") from None

    def _open(self, spec: EventSpec, tid: int, leader: int, period_ns: int) -> int:
        attr = make_attr(spec, exclusion_for(spec, None, self._priv), leader=leader == -1)
        attr.use_clockid = 1  # every member: the kernel groups only events on one clock
        attr.clockid = abi.CLOCK_REALTIME
        if period_ns:
            attr.sample_period = period_ns
            attr.sample_type = abi.PERF_SAMPLE_TID | abi.PERF_SAMPLE_TIME | abi.PERF_SAMPLE_READ
            attr.read_format = abi.PERF_FORMAT_GROUP
            attr.wakeup_events = 1 << 30  # nobody waits on the fd: it is drained between runs
        fd = abi.perf_event_open(attr, tid, -1, leader)
        self._fds.append(fd)
        return fd

    def enable(self) -> None:
        for leader, _ in self._rings.values():
            abi.ioctl_enable(leader)

    def disable(self) -> None:
        for leader, _ in self._rings.values():
            abi.ioctl_disable(leader)

    def mark(self, now_ns: int) -> None:
        """A sample of every thread's group read now (``now_ns`` on CLOCK_REALTIME): the edges of a
        stretch of samples (the kernel writes one only every period)."""
        n = len(self.names)
        for tid, (leader, _) in self._rings.items():
            raw = os.read(leader, 8 * (1 + n))
            values = struct.unpack(f"<{1 + n}Q", raw)
            self.samples[tid].times_ns.append(now_ns)
            self.samples[tid].counts.append(tuple(values[1:1 + n]))

    def take(self) -> dict[int, Samples]:
        """The samples so far, by thread; the next ones start afresh."""
        self.drain()
        out, self.samples = self.samples, {tid: Samples(tid) for tid in self.samples}
        for got in out.values():  # marks and the kernel's samples, in time order
            pairs = sorted(zip(got.times_ns, got.counts, strict=True))
            got.times_ns, got.counts = [t for t, _ in pairs], [c for _, c in pairs]
        return out

    def drain(self) -> None:
        """Read every thread's new samples into :attr:`samples`."""
        n = len(self.names)
        body = struct.Struct(f"<IIQQ{n}Q")  # pid, tid, time, nr, values
        for tid, (_, ring) in self._rings.items():
            data, at, out = ring.take(), 0, self.samples[tid]
            while at + 8 <= len(data):
                kind, _misc, size = struct.unpack_from("<IHH", data, at)
                if size == 0:
                    break
                if kind == abi.PERF_RECORD_SAMPLE and size >= 8 + body.size:
                    fields = body.unpack_from(data, at + 8)
                    out.times_ns.append(fields[2])
                    out.counts.append(tuple(fields[4:4 + n]))
                elif kind == abi.PERF_RECORD_LOST:
                    out.lost += struct.unpack_from("<QQ", data, at + 8)[1]
                at += size

    def close(self) -> None:
        for _, ring in self._rings.values():
            ring.close()
        self._rings.clear()
        close_all(self._fds)
        self._fds.clear()


def attribute(samples: Samples, intervals: Sequence[tuple[int, int, int]], n_slots: int,
              n_events: int) -> tuple[list[list[float]], list[float]]:
    """Spread one thread's sample deltas over ``intervals`` (slot, start ns, end ns; sorted by start,
    not overlapping): per slot the counts it got, and what fell outside every interval."""
    got = [[0.0] * n_events for _ in range(n_slots)]
    outside = [0.0] * n_events
    j = 0
    for k in range(1, len(samples.times_ns)):
        t0, t1 = samples.times_ns[k - 1], samples.times_ns[k]
        delta = [b - a for a, b in zip(samples.counts[k - 1], samples.counts[k], strict=True)]
        if t1 <= t0:
            continue
        while j < len(intervals) and intervals[j][2] <= t0:
            j += 1
        placed = 0.0
        i = j
        while i < len(intervals) and intervals[i][1] < t1:
            slot, a, b = intervals[i]
            share = (min(b, t1) - max(a, t0)) / (t1 - t0)
            if share > 0:
                placed += share
                for e in range(n_events):
                    got[slot][e] += share * delta[e]
            i += 1
        for e in range(n_events):
            outside[e] += (1.0 - placed) * delta[e]
    return got, outside
