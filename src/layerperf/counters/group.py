"""CounterSet: one counter group per thread of this process, read with one syscall per thread.

Why per thread: counters opened with inherit=1 follow only threads created *after* the open, and
ONNX Runtime's intra-op pool already exists by then; inherit is also incompatible with
PERF_FORMAT_GROUP reads. So we open the group on every thread listed in /proc/self/task.
"""

from __future__ import annotations

import contextlib
import io
import os
import struct
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from layerperf.counters import abi
from layerperf.counters._open import HEADER_WORDS, Exclusion, close_all, exclusion_for, open_group
from layerperf.counters.catalog import EventSpec, resolve
from layerperf.counters.perms import Privilege, current_privilege, require_user
from layerperf.counters.reading import Reading
from layerperf.errors import CounterError

Threads = str | Sequence[int]


@dataclass(frozen=True, slots=True)
class _Group:
    tid: int
    start_time: int  # disambiguates a tid the kernel reused after the first thread exited
    fds: tuple[int, ...]

    @property
    def leader(self) -> int:
        return self.fds[0]


def list_threads() -> list[int]:
    """Thread ids of this process right now."""
    return sorted(int(t) for t in os.listdir("/proc/self/task"))


def thread_start_time(tid: int) -> int | None:
    """Field 22 of /proc/self/task/<tid>/stat (start time in clock ticks), None if the thread is gone."""
    try:
        with open(f"/proc/self/task/{tid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return None
    # comm (field 2) may contain spaces and parentheses; everything after the last ')' is fixed.
    fields = stat[stat.rindex(b")") + 2 :].split()
    return int(fields[19])


def _as_specs(specs: Sequence[EventSpec | str]) -> tuple[EventSpec, ...]:
    out = tuple(resolve(s) if isinstance(s, str) else s for s in specs)
    if not out:
        raise CounterError("no perf events were requested")
    names = [s.name for s in out]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise CounterError(f"perf events requested twice: {', '.join(dupes)}")
    return out


class CounterSet:
    """A set of perf events counted as one group on each thread of this process.

    ::

        with CounterSet(["task-clock", "page-faults"]) as cs:
            cs.enable()
            before = cs.read()
            work()
            delta = cs.read() - before

    threads: "all" (every thread in /proc/self/task at open(); see refresh_threads), "self" (the
    calling thread), or explicit thread ids. include_kernel: None counts user mode (plus kernel mode
    for kernel-only events such as context-switches, where permitted), True counts kernel mode too
    for every event, False strictly user mode. All events must fit one PMU group; split larger sets
    with schedule(). Threads that exit keep their final counts in the sums.
    """

    def __init__(
        self,
        specs: Sequence[EventSpec | str],
        *,
        threads: Threads = "all",
        include_kernel: bool | None = None,
        privilege: Privilege | None = None,
    ) -> None:
        self.specs = _as_specs(specs)
        self.names = tuple(s.name for s in self.specs)
        self.privilege = privilege if privilege is not None else current_privilege()
        require_user(self.privilege)
        # Decided now, so permission problems surface before any syscall.
        self._excls: tuple[Exclusion, ...] = tuple(
            exclusion_for(s, include_kernel, self.privilege) for s in self.specs
        )
        self._threads = threads
        self._groups: list[_Group] = []
        self._keys: set[tuple[int, int]] = set()
        self._enabled = False
        self._stride = (HEADER_WORDS + len(self.specs)) * 8
        self._reads: list[tuple[Callable[[memoryview], int | None], memoryview]] = []
        self._buf = bytearray()
        self._single: struct.Struct | None = None
        self._matrix = np.zeros((0, HEADER_WORDS + len(self.specs)), dtype=np.uint64)

    # --- lifecycle --------------------------------------------------------------------------------
    @property
    def is_open(self) -> bool:
        """Whether counters are open."""
        return bool(self._groups)

    @property
    def threads(self) -> tuple[int, ...]:
        """The thread ids with an open group (exited ones included)."""
        return tuple(g.tid for g in self._groups)

    def open(self) -> CounterSet:
        """Open the group on each thread, disabled; enable() starts counting."""
        if self._groups:
            return self
        try:
            self._add_threads(self._wanted_threads(), explicit=self._threads != "all")
        except BaseException:
            self.close()
            raise
        if not self._groups:
            raise CounterError("none of the requested threads exists any more")
        return self

    def close(self) -> None:
        """Close every counter fd."""
        groups, self._groups = self._groups, []
        self._reads = []
        self._single = None
        self._keys = set()
        self._enabled = False
        self._matrix = np.zeros((0, HEADER_WORDS + len(self.specs)), dtype=np.uint64)
        for g in groups:
            close_all(g.fds)

    def __enter__(self) -> CounterSet:
        return self.open()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        with contextlib.suppress(Exception):  # interpreter shutdown may have torn down modules
            self.close()

    # --- control ----------------------------------------------------------------------------------
    def enable(self) -> None:
        """Start counting on every thread (one ioctl per group leader)."""
        self._require_open()
        for g in self._groups:
            abi.ioctl_enable(g.leader)
        self._enabled = True

    def disable(self) -> None:
        """Stop counting; counts stay readable."""
        self._require_open()
        for g in self._groups:
            abi.ioctl_disable(g.leader)
        self._enabled = False

    def refresh_threads(self) -> int:
        """Open the group on threads created since open() (threads="all" only); returns how many."""
        self._require_open()
        if self._threads != "all":
            return 0
        before = len(self._groups)
        self._add_threads(list_threads(), explicit=False)
        return len(self._groups) - before

    # --- the hot path -----------------------------------------------------------------------------
    def read_raw(self) -> tuple[int, ...]:
        """(time_enabled, time_running, count0, count1, ...) summed over threads: the cheapest read.

        One read(2) per thread into a preallocated buffer, then one column sum. Keep these tuples
        in a hot loop and turn them into Readings later with `reading()`.
        """
        stride = self._stride
        for readinto, view in self._reads:
            if readinto(view) != stride:
                self._require_open()
                raise CounterError("short read from a perf counter group")
        if self._single is not None:  # one thread: unpacking beats numpy's per-call overhead
            return self._single.unpack_from(self._buf, 8)  # skip the group's `nr` word
        return tuple(self._matrix.sum(axis=0).tolist()[1:])

    def read(self) -> Reading:
        """Cumulative counts summed over threads, as a Reading (subtract two for a delta)."""
        raw = self.read_raw()
        return Reading(self.names, raw[2:], raw[0], raw[1])

    def reading(self, raw: tuple[int, ...]) -> Reading:
        """The Reading for a tuple from read_raw()."""
        return Reading(self.names, tuple(raw[2:]), raw[0], raw[1])

    # --- internals --------------------------------------------------------------------------------
    def _require_open(self) -> None:
        if not self._groups:
            raise CounterError("the CounterSet is not open", "call open() or use it as a context manager")

    def _wanted_threads(self) -> list[int]:
        if self._threads == "all":
            return list_threads()
        if self._threads == "self":
            return [threading.get_native_id()]
        if isinstance(self._threads, str):
            raise CounterError(f"threads must be 'all', 'self' or thread ids, not {self._threads!r}")
        return [int(t) for t in self._threads]

    def _add_threads(self, tids: Sequence[int], *, explicit: bool) -> None:
        added = False
        for tid in tids:
            start = thread_start_time(tid)
            if start is None or (tid, start) in self._keys:
                if start is None and explicit:
                    raise CounterError(f"thread {tid} does not exist in this process")
                continue
            try:
                fds = open_group(tid, self.specs, self._excls, self.privilege)
            except OSError:  # ESRCH: the thread exited between listing and opening
                if explicit:
                    raise CounterError(f"thread {tid} exited before its counters were opened") from None
                continue
            group = _Group(tid, start, tuple(fds))
            self._groups.append(group)
            self._keys.add((tid, start))
            added = True
            if self._enabled:
                abi.ioctl_enable(group.leader)
        if added:
            self._rebuild_buffers()

    def _rebuild_buffers(self) -> None:
        # One contiguous buffer, a row per thread: readv fills the rows in place and numpy sums
        # the columns, so read() allocates nothing but the result.
        # FileIO(closefd=False).readinto is a bare read(2) into our memory, without the bytes
        # object os.read would allocate; the group's FileIO never closes the fd itself.
        rows = len(self._groups)
        words = HEADER_WORDS + len(self.specs)
        self._buf = buf = bytearray(rows * self._stride)
        view = memoryview(buf)
        self._matrix = np.frombuffer(buf, dtype=np.uint64).reshape(rows, words)
        self._single = struct.Struct(f"={words - 1}Q") if rows == 1 else None
        self._reads = [
            (
                io.FileIO(g.leader, "rb", closefd=False).readinto,
                view[i * self._stride : (i + 1) * self._stride],
            )
            for i, g in enumerate(self._groups)
        ]
