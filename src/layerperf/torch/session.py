"""One in-code profile session (:mod:`layerperf.torch`) from its validated settings to its Profile: the
collectors opened for the whole profile, the rows and runs it records (:mod:`.recording`), level 2's
torch.profiler sessions, and the Profile built at the end (the rows' work from :mod:`.row_costs`).

The user runs their code as often as they do, so nothing is re-run to count: every collector reads
at the boundaries of the runs that happen. Level 1 calls, at every row's start and stop, the perf
counters (one group per set of events the PMU counts together, all open for the whole profile, so
the kernel multiplexes them: each delta scaled by the time its group was counted, which the profile
keeps as ``fraction_counted``; opened on every thread of the process and on new ones at each run's
start, torch's intra-op threads included), resident memory (read at each row's end, every
``sample_rate``-th read kept as a sample) and the clock — in that order, so the clock reads nearest
the row's work. Counting adds its reads to the times (see the README).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from layerperf.analysis.memory.report import analyze_memory, with_allocations
from layerperf.backends.base import RunPlan
from layerperf.backends.common import profile_metadata
from layerperf.backends.torch.build import build_profile
from layerperf.backends.torch.compiled import original
from layerperf.backends.torch.cuda import CudaEvents, device_name, fill_memory
from layerperf.backends.torch.hooks import own_calls
from layerperf.backends.torch.models import one_line
from layerperf.backends.torch.op_rows import Recorded, assemble
from layerperf.backends.torch.quiet_profiler import QuietProfiler, activities, events_with_links
from layerperf.backends.torch.ranges import RETURN_MARK, RUN_MARK, Ranges, cpu_marks, mark_layer
from layerperf.collectors import Boundaries, Collector, Collectors
from layerperf.collectors.boundary import empty_pass
from layerperf.collectors.driver import boundary_ns, counter_groups, counter_overhead
from layerperf.collectors.perf import PerfCounters
from layerperf.collectors.perf_counts import CounterResult
from layerperf.collectors.rss import ResidentMemory
from layerperf.collectors.timer import Timing
from layerperf.counters import CounterSet
from layerperf.data.memory_report import RuntimeMemory
from layerperf.data.profile import Layer, Profile
from layerperf.errors import InputError
from layerperf.torch.memory_run import AllocationRun
from layerperf.torch.recording import BACKWARD, FORWARD, Recording, RunClock
from layerperf.torch.row_costs import forward_costs, outside_costs


@dataclass(frozen=True, slots=True)
class Settings:
    """An in-code profile's validated options."""

    level: int
    warmup: int
    collectors: Collectors
    device: str
    path: Path | None
    formats: tuple[str, ...]

    def options(self) -> dict[str, Any]:
        """The options as the profile's metadata records them."""
        c = self.collectors
        return {"warmup": self.warmup, "level": self.level, "in_situ": True, "profile_device": self.device,
                "events": list(c.counters.labels) if c.counters else [],
                "memory": c.memory is not None, "sample_rate": c.memory.sample_rate if c.memory else None}


class _NewThreads:
    """Opens the counter groups on threads started since the last run (torch starts its pool lazily)."""

    def __init__(self, sets: list[CounterSet]) -> None:
        self.sets = sets

    def begin_pass(self) -> None:
        for cs in self.sets:
            cs.refresh_threads()

    def start(self, layer: int) -> None:
        pass

    def stop(self, layer: int) -> None:
        pass

    def end_pass(self) -> None:
        pass


class InCodeSession:
    """The collectors and the recording of one in-code profile; :meth:`build` makes its Profile."""

    def __init__(self, settings: Settings, *, runs_by_call: bool) -> None:
        self.settings = settings
        self.clock = RunClock()
        self.timing: Timing | None = None
        self.sets: list[CounterSet] = []
        self.perf: list[PerfCounters] = []
        self.groups: list[list[str]] = []
        self.labels: dict[str, str] = {}
        self.call_ns = math.nan
        self.rss: ResidentMemory | None = None
        self.sessions: list[QuietProfiler] = []  # level 2: the torch.profiler sessions, in order
        self.device_events: CudaEvents | None = None  # profile_device="cuda", level 1: device time per row
        self.allocator_counts: CudaEvents | None = None  # and with memory=True the allocator's counters
        boundary: Collector
        if settings.level == 2:
            boundary = Ranges()
        else:
            self.timing = Timing(self.clock)
            collectors: list[Collector] = []
            try:
                collectors += self._open_counters()
                collectors += self._open_memory()
            except BaseException:
                self.close()
                raise
            if settings.device == "cuda":  # innermost: its events are recorded nearest the row's work
                # events only: the allocator's counters, read at each boundary, cost far more than the
                # events (see cuda.CudaEvents); with memory=True they are read in the run recorded for
                # memory, which is not timed (below)
                self.device_events = CudaEvents(allocator=False)
                collectors.append(self.timing)
                boundary = Boundaries([*collectors, self.device_events])
            else:
                boundary = Boundaries([*collectors, self.timing]) if collectors else self.timing
        capture = None
        if settings.level == 1 and settings.collectors.memory is not None:
            if settings.device == "cuda":
                self.allocator_counts = CudaEvents(allocator=True)
            capture = AllocationRun(device_name(settings.device), alongside=self.allocator_counts)
        self.recording = Recording(settings.warmup, boundary, self.clock, runs_by_call=runs_by_call, capture=capture,
                                   root_row=settings.level == 1)

    def _open_counters(self) -> list[Collector]:
        request = self.settings.collectors.counters
        if request is None:
            return []
        import torch

        torch.ones(1 << 20).add_(1)  # a parallel op: torch's intra-op pool starts now, before the groups open
        self.labels, groups = counter_groups(replace(request, multiplex=False))
        for group in groups:
            cs = CounterSet(group, threads="all").open()
            self.sets.append(cs)
            cs.enable()
            self.perf.append(PerfCounters(cs, counter_overhead(cs, empty_pass)))
            self.groups.append([spec.name for spec in group])
        self.call_ns = boundary_ns(empty_pass)
        return [_NewThreads(self.sets), *self.perf]

    def _open_memory(self) -> list[Collector]:
        request = self.settings.collectors.memory
        if request is None or not request.sample_rate:
            return []
        self.rss = ResidentMemory(request.sample_rate)
        return [self.rss]

    def abandon(self) -> None:
        """The profiled code raised: a run being recorded for memory ends its profiler session; nothing
        is built."""
        self.recording.abandon()
        self.close()

    def close(self) -> None:
        for cs in self.sets:
            cs.close()
        if self.rss is not None:
            self.rss.close()

    def level2_profiler(self) -> QuietProfiler:
        """A torch.profiler session (level 2), kept for :meth:`build`; enter it around the profiled code."""
        import torch

        if torch.autograd._profiler_enabled():
            raise InputError("level 2 runs a torch.profiler session of its own, and one is already running",
                             hint="stop the other profiler first, or profile at level 1")

        # the first session records the ops' shapes (for their inputs and work); the later ones (the
        # decorator's calls after the first) do not, which costs their runs 3-5% less
        session = QuietProfiler(activities=activities(self.settings.device), record_shapes=not self.sessions)
        self.sessions.append(session)
        return session

    # -- the profile ------------------------------------------------------------------------------------
    def build(self) -> Profile:
        import torch

        state = self.recording
        state.finish()
        if state.captured and not state.runs:
            raise InputError("memory=True: the first run after warm-up records the allocator's events and is not "
                             "timed, and no run followed it", hint="profile at least one more run (call the model "
                             "or the decorated function again)")
        names = {r.name for r in state.rows}
        layers = [Layer(name=r.name, op_type=r.op_type, domain=r.domain, provider=self.settings.device,
                        param_bytes=_param_bytes(r.owner) if r.kind == FORWARD else 0,
                        parent=state.rows[r.parent].name if r.parent is not None else None)
                  for r in state.rows]
        grad = any(r.kind == BACKWARD for r in state.rows)
        with own_calls():  # no other in-code profile records these passes as a run of its own
            warnings, graph = forward_costs(original(state.root), state.first, layers, names, grad=grad)
            warnings += outside_costs(state, layers, names)
        if state.kwargs_unread:
            warnings.append("the model's keyword arguments could not be read in its hooks: the untimed re-run for "
                            "shapes and FLOPs passed its positional arguments only")
        warnings += state.warnings()
        warnings += [f"{said}: its run holds what ran before" for said in state.failures]
        if not state.runs:
            warnings.insert(0, _no_runs(state.calls, self.settings.warmup))
        desc = {"name": type(original(state.root)).__name__ if state.root is not None else "?"}
        meta = profile_metadata(desc, RunPlan(warmup=self.settings.warmup, runs=max(state.runs, 1)), "torch",
                                torch.__version__, self.settings.device, self.settings.options(), plan_fields=())
        if self.settings.level == 2:
            # level 2: a module's work is on the op rows under it, so its figures are its children's
            layers, runs, notes = assemble(layers, self._level2_runs())
            return build_profile(meta, layers, runs, level=2, warnings=[*warnings, *notes], graph=graph)
        assert self.timing is not None
        runs = self.timing.runs()
        if self.device_events is not None and state.runs:
            runs = self.device_events.runs()  # device time between each row's boundaries
            if self.allocator_counts is not None and state.captured:
                fill_memory(layers, self.allocator_counts)
        prof = build_profile(meta, layers, runs, level=1, warnings=warnings, graph=graph)
        if self.perf and state.runs:
            self._fill_counters(prof)
        if self.settings.collectors.memory is not None and state.runs:  # an empty profile has no memory to show
            self._fill_memory(prof)
        return prof

    def _fill_counters(self, prof: Profile) -> None:
        request = self.settings.collectors.counters
        assert request is not None and self.timing is not None
        n = len(prof.layers)
        counts: dict[str, list[list[float]]] = {}
        inclusive: dict[str, list[list[float]]] = {}
        fraction: dict[str, list[list[float]]] = {}
        calibration: dict[str, float] = {}
        for perf, group in zip(self.perf, self.groups, strict=True):
            tally = perf.tally(n)  # self counts, as the rows' times are self times
            calibration.update({self.labels[k]: v for k, v in perf.overhead.items()})
            counts.update({self.labels[k]: v for k, v in tally.counts.items()})
            inclusive.update({self.labels[k]: v for k, v in tally.inclusive.items()})
            fraction.update({self.labels[name]: tally.fraction for name in group})
        result = CounterResult(counts=counts, fraction=fraction, calibration=calibration,
                               call_overhead_ns=self.call_ns, node_ns=self.timing.self_calls_ns(n),
                               schedule=self.groups, inclusive=inclusive)
        prof.counters = result.apply(prof.layers, replace(request, passes=self.recording.runs, multiplex=True))

    def _fill_memory(self, prof: Profile) -> None:
        """The memory report: what the collectors give (resident memory at row boundaries, the tensors'
        live bytes from the forward rows' shapes), and the allocator's events per row from the run that
        :class:`.memory_run.AllocationRun` recorded (the first after warm-up: forward, backward and
        optimizer step rows alike)."""
        runtime: RuntimeMemory = self.rss.runtime() if self.rss is not None else RuntimeMemory(sample_rate=0)
        prof.memory = analyze_memory(prof, runtime)
        capture = self.recording.capture
        if capture is not None and capture.skipped:
            prof.memory = replace(prof.memory, warnings=(
                *prof.memory.warnings, "no allocator figures per row: torch.profiler was already running when the run "
                "to record began, and the memory run needs a session of its own (stopping the user's would end "
                "its trace)"))
        names = [layer.name for layer in prof.layers]
        to_last_mark = not self.recording.runs_by_call
        allocs = capture.allocations(names, to_last_mark=to_last_mark) if capture is not None else None
        if allocs is not None:
            prof.memory = with_allocations(prof.memory, allocs)

    def _level2_runs(self) -> list[Recorded]:
        """Each run as recorded: its ``layerperf::run`` range and the events inside it. A with block's run
        range closes lazily, at the next model call (or when the profile ends): such a run ends at its
        last row's end or where the model last returned, as at level 1, so the time between steps is in
        no run."""
        from torch.autograd import DeviceType

        out = []
        extents = iter(self.recording.extents)
        for k, session in enumerate(self.sessions):
            events = events_with_links(session)
            cpu = [e for e in events if e.device_type == DeviceType.CPU]
            device = [e for e in events if e.device_type != DeviceType.CPU]
            rows = [e for e in cpu if mark_layer(e.name) is not None or e.name == RETURN_MARK]
            for mark in cpu_marks(events, RUN_MARK):
                t0, t1 = next(extents, (0, 0))
                lo, hi = mark.time_range.start, mark.time_range.end
                if not self.recording.runs_by_call:
                    hi = max((e.time_range.end for e in rows if lo <= e.time_range.start <= hi), default=hi)
                inside = [mark] + [e for e in cpu if e is not mark and e.name != RUN_MARK
                                   and lo <= e.time_range.start <= hi]
                # the device's work (kernels, copies) that this run's ops launched, whenever it ran
                launched = {e.id for e in inside}
                inside += [e for e in device if getattr(e, "linked_correlation_id", 0) in launched]
                out.append(Recorded(t0, t1 - t0, None, inside, k == 0, mark))
        return out


def _no_runs(calls: int, warmup: int) -> str:
    """The warning of a profile with no timed run: an empty profile, and why."""
    if not calls:
        return "no timed run: no call of a module was profiled; the profile is empty"
    return (f"no timed run: all {calls} run(s) were warm-up (warmup={warmup}); the profile is empty (profile more "
            "runs than warmup)")


def failure(recording: Recording | None, exc: BaseException, fn: str | None, warmup: int) -> str:
    """Why a profile was not made, in one line: the model, the run its code raised in (``fn``: the decorated
    function, whose calls are the runs; else a with block's, the model's calls) and the exception."""
    root = recording.root if recording is not None else None
    model = type(original(root)).__name__ if root is not None else None
    calls = recording.calls if recording is not None else 0
    warm = " (warm-up)" if 0 < calls <= warmup else ""
    raised = f"{type(exc).__name__}: {one_line(exc)}"
    if fn is not None:
        return f"{fn}: call {calls}{warm}{f' (model {model})' if model else ''} raised {raised}"
    if not calls:
        return f"{model or 'the profiled code'}: raised before the first run: {raised}"
    return f"{model}: run {calls}{warm} raised {raised}"


def _param_bytes(mod: Any) -> int:
    return sum(p.numel() * p.element_size() for p in mod.parameters(recurse=False))
