"""The memory run of an in-code profile (``memory=True``): the first run after warm-up recorded under
torch.profiler with ``profile_memory=True`` (the backend's memory run, :mod:`layerperf.backends.torch.memory`),
its rows marked as profiler ranges."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from layerperf.backends.torch.memory import memory_profiler, recorded_allocations
from layerperf.backends.torch.quiet_profiler import QuietProfiler
from layerperf.backends.torch.ranges import Ranges
from layerperf.collectors import Boundaries
from layerperf.data.memory_report import Allocations

if TYPE_CHECKING:
    from layerperf.collectors import Collector


class AllocationRun:
    """One run of the user's own code recorded under torch.profiler with ``profile_memory=True``, each
    row a profiler range (:class:`~layerperf.backends.torch.ranges.Ranges`): every allocation and free
    of the run — forward, backward, optimizer step — attributed to the row running then. The run is
    the first after warm-up; :class:`.recording.Recording` keeps it out of the timed runs (its rows'
    times would carry the profiler's cost)."""

    def __init__(self, device: str = "cpu", alongside: Collector | None = None) -> None:
        self.device = device
        # the rows' ranges, and a collector driven at the same boundaries in that run (on a GPU: the
        # caching allocator's counters, too costly to read in the timed runs) inside them
        self.boundary = Boundaries([Ranges(), *([alongside] if alongside is not None else [])])
        self.start, self.stop = self.boundary.start, self.boundary.stop
        self._session: QuietProfiler | None = None
        self.done = False
        self.skipped = False  # a profiler was already running: nothing recorded

    def begin(self) -> bool:
        """At a run's start: True, and recording, if this is the run to record."""
        if self.done or self._session is not None:
            return False
        import torch

        if torch.autograd._profiler_enabled():  # the user's own session: starting ours would end it
            self.done = self.skipped = True
            return False
        self._session = memory_profiler(self.device)
        self._session.__enter__()
        self.boundary.begin_pass()
        return True

    def end(self) -> None:
        assert self._session is not None
        self.boundary.end_pass()
        self._session.__exit__(None, None, None)
        self.done = True

    def allocations(self, names: Sequence[str], *, to_last_mark: bool) -> Allocations | None:
        """The recorded run's allocations per row (``names``: the rows' names); None if none was recorded."""
        if not self.done or self.skipped or self._session is None:
            return None
        return recorded_allocations(self._session, names, self.device, to_last_mark=to_last_mark)
