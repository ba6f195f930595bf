"""Collectors: what a backend measures besides its own timings — perf counters, resident memory.

A backend receives one :class:`Collectors` with the validated requests (None for what was not asked)
and drives them at layer boundaries; requests are checked when made, before any model runs, so an
unusable event or option fails in seconds, not after minutes of profiling.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from layerperf.collectors.counters import CounterRequest
from layerperf.collectors.memory import MemoryRequest

Progress = Callable[[str, int, int], None]

__all__ = ["Collectors", "CounterRequest", "MemoryRequest", "Progress"]


@dataclass(frozen=True, slots=True)
class Collectors:
    """The requested collectors (None: not asked) and the progress callback (what, done, total)."""

    counters: CounterRequest | None = None
    memory: MemoryRequest | None = None
    progress: Progress | None = None

    @classmethod
    def make(cls, *, events: Sequence[str] | None = None, perf_config: str | Path | None = None, passes: int = 5,
             multiplex: bool = False, memory: bool = False, sample_rate: int | None = None,
             progress: Progress | None = None) -> Collectors:
        """Validate the requests: an unusable perf event is opened once now, not after the runs."""
        counters = CounterRequest.build(list(events or []), perf_config, passes, multiplex)
        if counters:
            counters.check()
        return cls(counters, MemoryRequest.make(memory, sample_rate), progress)
