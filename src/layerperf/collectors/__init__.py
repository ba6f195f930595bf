"""Collectors: what a backend measures at layer boundaries — time, perf counters, resident memory.

A backend receives one :class:`Collectors` with the validated requests (None for what was not asked);
requests are checked when made, before any model runs, so an unusable event or option fails in
seconds, not after minutes of profiling. The collectors themselves are small objects a backend calls
around each pass and each layer (:class:`~layerperf.collectors.boundary.Collector`):
:class:`~layerperf.collectors.timer.Timing`, :class:`~layerperf.collectors.perf.PerfCounters`,
:class:`~layerperf.collectors.rss.ResidentMemory`; :meth:`Collectors.driver` gives the object that
runs the passes a request needs and puts the results on the Profile.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from layerperf.collectors.boundary import Boundaries, Collector, PassFn, empty_pass
from layerperf.collectors.driver import Driver
from layerperf.collectors.perf import CounterRequest
from layerperf.collectors.rss import MemoryRequest

Progress = Callable[[str, int, int], None]


__all__ = ["Boundaries", "Collector", "Collectors", "CounterRequest", "MemoryRequest", "PassFn", "Progress"]


@dataclass(frozen=True, slots=True)
class Collectors:
    """The requested collectors (None: not asked) and the progress callback (what, done, total)."""

    counters: CounterRequest | None = None
    memory: MemoryRequest | None = None
    progress: Progress | None = None

    @classmethod
    def make(cls, *, events: str | Sequence[str] | None = None, perf_config: str | Path | None = None, passes: int = 5,
             multiplex: bool = False, memory: bool = False, sample_rate: int | None = None,
             progress: Progress | None = None) -> Collectors:
        """Validate the requests: an unusable perf event is opened once now, not after the runs."""
        counters = CounterRequest.build(events, perf_config, passes, multiplex)
        if counters:
            counters.check()
        return cls(counters, MemoryRequest.make(memory, sample_rate), progress)

    def driver(self, n_layers: int, *, threads: str = "all", calibrate: PassFn = empty_pass,
               reference: Callable[[], object] | None = None) -> Driver:
        """The object that runs the passes these requests need over a backend's ``n_layers`` layers (see
        :mod:`layerperf.collectors.driver`). ``threads``: the counter group's, ``"all"`` (this process's)
        or ``"self"``; ``calibrate``: one pass over a layer that does nothing, run as a real one is;
        ``reference``: one in-situ run, alternated with the timing passes."""
        return Driver(self, n_layers, threads=threads, calibrate=calibrate, reference=reference)
