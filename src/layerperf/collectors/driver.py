"""The collector driver: the passes a :class:`~layerperf.collectors.Collectors` request needs, run
through a backend's own pass function, and their results put on the Profile.

A backend hands it one function that runs the model once, calling a collector's boundaries
(:data:`~layerperf.collectors.boundary.PassFn`), and gets counters and memory with no code of its own::
    driver = collectors.driver(len(layers))
    driver.run(lambda c: run_once(feed, c))
    driver.fill(profile)            # Layer.counters, profile.counters, profile.memory

The passes, in this order: resident memory (:data:`MEMORY_PASSES` passes), then for each group of
events the PMU counts together (:func:`~layerperf.counters.schedule`, or one group when
multiplexing): ``calibrate`` :data:`CALIBRATION_PASSES` times and ``passes`` passes of the model,
each on the group opened once; then the timing: ``calibrate`` again and ``passes`` passes with a
clock alone, for the counting passes' own time per layer.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

import numpy as np

from layerperf.analysis.memory.report import analyze_memory
from layerperf.collectors import disturbance
from layerperf.collectors.boundary import Collector, PassFn, empty_pass
from layerperf.collectors.perf import CounterRequest, PerfCounters
from layerperf.collectors.perf_counts import CounterResult
from layerperf.collectors.rss import MemoryRequest, ResidentMemory
from layerperf.collectors.timer import Timing
from layerperf.counters import CounterSet, EventSpec, resolve, schedule
from layerperf.data.memory_report import RuntimeMemory
from layerperf.data.profile import Profile


class Request(Protocol):
    """What the driver reads of a :class:`~layerperf.collectors.Collectors` request."""

    @property
    def counters(self) -> CounterRequest | None: ...
    @property
    def memory(self) -> MemoryRequest | None: ...
    @property
    def progress(self) -> Callable[[str, int, int], None] | None: ...


CALIBRATION_PASSES = 50
INTERLEAVED_PASSES = 10  # timing passes at least, when a reference run comes before each
# with a reference, a disturbed pair is replaced by another until that many pairs are clean, up to this
# many times as many pairs in all: on a host slowed for seconds at a time, the comparison stands on pairs
# that ran at full speed (bench's speed checks set slowed samples aside and replace them the same way)
REPLACE_FACTOR = 3
MEMORY_PASSES = 2  # as a fresh session's first run allocates, and the second reuses


class Driver:
    """Runs the passes ``request`` needs over ``n_layers`` layers and keeps what they measured.

    ``threads``: the threads the counter group is opened on (``"all"`` of this process: a runtime's
    pool workers are counted; ``"self"``: the calling thread). ``calibrate`` runs a pass over one
    layer (index 0) that does nothing, the way the backend runs a real one (default: two bare
    boundaries); its median counts and time are subtracted from every layer's. ``reference``, when given,
    runs the model the real way (in situ) before each timing pass: the two alternate, so that the host's
    drift hits both, and each pair is checked for a CPU taken or slowed (:mod:`.disturbance`).
    """

    def __init__(self, request: Request, n_layers: int, *, threads: str = "all",
                 calibrate: PassFn = empty_pass, reference: Callable[[], object] | None = None) -> None:
        self.request = request
        self.n_layers = n_layers
        self.threads = threads
        self.calibrate = calibrate
        self.reference = reference
        self.counted: CounterResult | None = None
        self.memory: RuntimeMemory | None = None
        self._done = self._total = 0
        self._label = progress_label(request)

    def run(self, one_pass: PassFn) -> Driver:
        """Run every pass the request needs through ``one_pass``; then :meth:`fill` the profile."""
        counters, memory = self.request.counters, self.request.memory
        labels, groups = counter_groups(counters) if counters else ({}, [])
        rate = memory.sample_rate if memory else 0
        passes = counters.passes if counters else 0
        self._total = (MEMORY_PASSES if rate else 0) + len(groups) * passes + self._timing_passes(passes)
        if memory is not None:
            self.memory = self._sample_memory(one_pass, rate)
        if counters is not None:
            self.counted = self._count(one_pass, counters.passes, labels, groups)
        return self

    def fill(self, profile: Profile) -> None:
        """Counts onto ``profile.layers`` and ``profile.counters``; the memory report into ``profile.memory``
        (the analysis of the profile's layers with the resident memory read here)."""
        if self.counted is not None and self.request.counters is not None:
            profile.counters = self.counted.apply(profile.layers, self.request.counters)
        if self.request.memory is not None:
            profile.memory = analyze_memory(profile, self.memory)

    # -- the passes --------------------------------------------------------------------------------
    def _passes(self, collector: Collector, one_pass: PassFn, n: int) -> None:
        for _ in range(n):
            one_pass(collector)
            self._done += 1
            if self.request.progress:
                self.request.progress(self._label, self._done, self._total)

    def _sample_memory(self, one_pass: PassFn, rate: int) -> RuntimeMemory:
        if not rate:
            return RuntimeMemory(sample_rate=0)
        with ResidentMemory(rate) as rss:
            self._passes(rss, one_pass, MEMORY_PASSES)
        return rss.runtime()

    def _count(self, one_pass: PassFn, passes: int, name_label: dict[str, str],
               groups: list[list[EventSpec]]) -> CounterResult:
        counts: dict[str, list[list[float]]] = {}
        inclusive: dict[str, list[list[float]]] = {}
        fraction: dict[str, list[list[float]]] = {}
        calibration: dict[str, float] = {}
        for group in groups:
            with CounterSet(group, threads=self.threads) as cs:
                cs.enable()
                overhead = self._counter_overhead(cs)
                counters = PerfCounters(cs, overhead)
                self._passes(counters, one_pass, passes)
            tally = counters.tally(self.n_layers)
            calibration.update({name_label[k]: v for k, v in overhead.items()})
            counts.update({name_label[k]: v for k, v in tally.counts.items()})
            inclusive.update({name_label[k]: v for k, v in tally.inclusive.items()})
            fraction.update({name_label[spec.name]: tally.fraction for spec in group})
        call_ns, node_ns, disturbed = self._time(one_pass, passes)
        return CounterResult(counts=counts, fraction=fraction, calibration=calibration, call_overhead_ns=call_ns,
                             node_ns=node_ns, schedule=[[spec.name for spec in group] for group in groups],
                             inclusive=inclusive, disturbed=disturbed)

    def _counter_overhead(self, cs: CounterSet) -> dict[str, float]:
        return counter_overhead(cs, self.calibrate)

    def _timing_passes(self, passes: int) -> int:
        return passes if self.reference is None or not passes else max(passes, INTERLEAVED_PASSES)

    def _time(self, one_pass: PassFn, passes: int) -> tuple[float, list[list[int]], list[bool] | None]:
        """What an empty layer takes (median ns); each layer's call durations over the timing passes (self
        time: less the calls made directly inside each, as the counts); with a reference, whether each
        pass or the reference run before it was disturbed."""
        call_ns = boundary_ns(self.calibrate)
        timing = Timing()
        if self.reference is None:
            self._passes(timing, one_pass, passes)
            return call_ns, timing.self_calls_ns(self.n_layers), None
        marks = [disturbance.mark()]
        wanted = self._timing_passes(passes)
        done = 0
        while True:
            self.reference()
            marks.append(disturbance.mark())
            self._passes(timing, one_pass, 1)
            marks.append(disturbance.mark())
            done += 1
            if done >= wanted:
                clean = done - sum(disturbance.pairs_disturbed(marks))
                if clean >= wanted or done >= REPLACE_FACTOR * wanted:
                    break
                self._total += 1  # one more pair, in place of a disturbed one
        return call_ns, timing.self_calls_ns(self.n_layers), disturbance.pairs_disturbed(marks)


def progress_label(request: Request) -> str:
    """What the progress bar says the passes collect: only what the request asked for."""
    what = [name for name, asked in (("counters", request.counters is not None),
                                     ("memory", request.memory is not None and request.memory.sample_rate > 0))
            if asked]
    return f"collecting ({', '.join(what)})"


def counter_overhead(cs: CounterSet, calibrate: PassFn = empty_pass) -> dict[str, float]:
    """Median counts of an empty layer's boundary (``calibrate``), read the same way as a real layer's."""
    empty = PerfCounters(cs)
    for _ in range(CALIBRATION_PASSES):
        calibrate(empty)
    got, _ = empty.counts(1)
    return {name: float(np.median(per_layer[0])) for name, per_layer in got.items()}


def boundary_ns(calibrate: PassFn = empty_pass) -> float:
    """Median time of an empty layer's boundary (``calibrate``) under the timing collector."""
    empty = Timing()
    for _ in range(CALIBRATION_PASSES):
        calibrate(empty)
    return float(np.median(empty.calls_ns(1)[0]))


def counter_groups(request: CounterRequest) -> tuple[dict[str, str], list[list[EventSpec]]]:
    """The events of a counter ``request``: each one's label by its resolved name, and the groups counted
    apart (one group when the request multiplexes them)."""

    specs = [resolve(e) for e in request.events]
    labels = {spec.name: label for spec, label in zip(specs, request.labels, strict=True)}
    return labels, [specs] if request.multiplex else schedule(specs)
