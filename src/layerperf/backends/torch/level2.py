"""The backend's level 2: the modules and, inside each, the aten ops it calls, from torch.profiler.

Each hooked run goes under a profiler session of its own, so the plain runs it alternates with carry
no profiler. The run is one profiler range and each module call one inside it (:mod:`.ranges`),
opened and closed by the profiled modules' own ``forward``s wrapped for the run
(:func:`.hooks.forward_wrappers`, which leaves torch's fast call path alone; global module hooks send
every call through the slow one, 2-5% of the run under the profiler). Stamps read from Python on the
profiler's clock were tried, and on a VM whose cores' time-stamp counters disagree they fell up to
3 µs off the ops: the ranges are the profiler's own.

The timed runs carry the profiler's default options. One untimed run records the ops' arguments
(``record_shapes``), from which each op row's inputs and work come (:mod:`.op_replay`); the rows are
made in :mod:`.op_rows`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from layerperf.backends.base import RunPlan
from layerperf.backends.common import RunTimes, interleaved
from layerperf.backends.torch.hooks import forward_wrappers
from layerperf.backends.torch.op_rows import Recorded, assemble
from layerperf.backends.torch.quiet_profiler import QuietProfiler, activities, events_with_links
from layerperf.backends.torch.ranges import Ranges
from layerperf.backends.torch.record import Recorder
from layerperf.backends.torch.runner import Runner
from layerperf.data.profile import Layer, Run


@dataclass(frozen=True, slots=True)
class Level2Runs:
    """What level 2's runs recorded: the layers (modules, then op rows) and runs, the warnings on them,
    the plain runs' timings and the profiled runs' CPU time (ns, the calling thread's)."""

    layers: list[Layer]
    runs: list[Run]
    warnings: list[str]
    plain: RunTimes
    cpu_ns: list[int]


def level2_runs(runner: Runner, rec: Recorder, layers: list[Layer], plan: RunPlan,
                progress: Callable[[str, int, int], None] | None, device: str = "cpu") -> Level2Runs:
    """One untimed run recording the ops' shapes, then hooked runs each under torch.profiler, plain runs
    between them; on a GPU (``device`` "cuda") the kernels too, each under its module."""
    run = Level2Run(runner, runner.index(rec), device)
    described = run(shapes=True)
    timed: list[Recorded] = []
    done = (lambda n: progress("profiled runs (level 2)", n, plan.runs)) if progress else None
    plain, _ = interleaved(runner.call if plan.latency else None, lambda: timed.append(run()), plan.runs, done=done,
                           between=plan.between_runs)
    cpu = [got.cpu_ns for got in timed if got.cpu_ns is not None]  # a level-2 run of the backend always reads it
    all_layers, runs, notes = assemble(layers, timed, [described])
    return Level2Runs(all_layers, runs, notes, plain, cpu)


class Level2Run:
    """One level-2 run of a runner's model per call: under a torch.profiler session of its own (on a
    GPU with the device activity), the profiled modules' forwards wrapped to open a profiler range
    each (:class:`.ranges.Ranges`). ``shapes``: the profiler records each op's arguments
    (``record_shapes``), which costs the run 3-5% more (benchmarks/torch_overhead.py: torch.profiler's
    default against record_shapes), so level 2 does it in one untimed run only."""

    def __init__(self, runner: Runner, index: dict[int, int], device: str = "cpu") -> None:
        self.runner = runner
        self.targets = runner.targets(index)
        self.ranges = Ranges(index)
        self.activities = activities(device)

    def __call__(self, *, shapes: bool = False) -> Recorded:
        ranges = self.ranges
        with QuietProfiler(activities=self.activities, record_shapes=shapes) as prof, \
                forward_wrappers(self.targets, ranges.start, ranges.stop):
            c0, t0 = time.thread_time_ns(), time.perf_counter_ns()
            ranges.begin_pass()
            try:
                self.runner.call("level-2 run recording shapes" if shapes else "level-2 profiled run")
            finally:
                ranges.end_pass()
            t1, c1 = time.perf_counter_ns(), time.thread_time_ns()
        return Recorded(t0, t1 - t0, c1 - c0, events_with_links(prof), shapes)
