"""The memory collector: its request (the memory profile, resident memory sampled every ``sample_rate``
layers), and the collector that reads resident memory at each layer's end."""

from __future__ import annotations

import functools
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from layerperf.collectors.boundary import MarkLog, outside_pass
from layerperf.collectors.rss_sampler import STATM, check_available
from layerperf.data.memory_report import RssSample, RuntimeMemory
from layerperf.errors import InputError

if TYPE_CHECKING:
    pass

DEFAULT_SAMPLE_RATE = 1


@dataclass(frozen=True, slots=True)
class MemoryRequest:
    """A validated request for the memory profile, made before any run so bad options fail first."""

    sample_rate: int = DEFAULT_SAMPLE_RATE

    @classmethod
    def make(cls, memory: bool, sample_rate: int | None) -> MemoryRequest | None:
        if not memory:
            if sample_rate is not None:
                raise InputError("a sample rate applies to the memory profile only", hint="add --memory")
            return None
        rate = DEFAULT_SAMPLE_RATE if sample_rate is None else sample_rate
        if isinstance(rate, bool) or not isinstance(rate, int) or rate < 0:
            raise InputError(f"--sample-rate must be an integer, 0 (off) or more, got {sample_rate!r}")
        if rate:
            check_available()
        return cls(rate)


class ResidentMemory:
    """Resident memory read at the end of every layer (``/proc/self/statm``, or ``read``), the text
    kept as read and parsed afterwards; every ``sample_rate``-th layer of a pass becomes a sample,
    and the high-water mark counts every reading. The baseline is read as the first pass begins.
    """

    def __init__(self, sample_rate: int = DEFAULT_SAMPLE_RATE, *, read: Callable[[], bytes] | None = None,
                 clock: Callable[[], int] = time.perf_counter_ns) -> None:
        if sample_rate < 1:
            raise InputError(f"a resident-memory sample rate must be 1 or more, got {sample_rate}")
        self.sample_rate = sample_rate
        self._fd: int | None = None
        if read is None:
            check_available()
            fd = self._fd = os.open(STATM, os.O_RDONLY)
            read = functools.partial(os.pread, fd, 128, 0)
        self._read = read
        self._clock = clock
        self._page = os.sysconf("SC_PAGE_SIZE")
        self._log: MarkLog[tuple[int, bytes]] = MarkLog()
        self._add: Callable[[tuple[int, tuple[int, bytes]]], None] = outside_pass
        self._begun: list[int] = []
        self._baseline: bytes | None = None

    def begin_pass(self) -> None:
        if self._baseline is None:
            self._baseline = self._read()
        self._add = self._log.begin()
        self._begun.append(self._clock())

    def start(self, layer: int) -> None:
        pass

    def stop(self, layer: int) -> None:
        self._add((~layer, (self._clock(), self._read())))

    def end_pass(self) -> None:
        self._add = outside_pass

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> ResidentMemory:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _bytes(self, raw: bytes) -> int:
        return int(raw.split()[1]) * self._page  # statm: size, resident, ... in pages

    def runtime(self) -> RuntimeMemory:
        """The readings as the memory analysis takes them (no arena figures: a backend without one)."""

        if self._baseline is None:
            return RuntimeMemory(sample_rate=self.sample_rate)
        baseline = hwm = self._bytes(self._baseline)
        samples = []
        for run, (begun, marks) in enumerate(zip(self._begun, self._log.passes, strict=True)):
            for k, (mark, (t_ns, raw)) in enumerate(marks):
                rss = self._bytes(raw)
                hwm = max(hwm, rss)
                if k % self.sample_rate == 0:
                    samples.append(RssSample(run, ~mark, max(0, t_ns - begun), rss, hwm))
        return RuntimeMemory(sample_rate=self.sample_rate, rss_baseline_bytes=baseline, rss_hwm_bytes=hwm,
                             rss_samples=tuple(samples))
