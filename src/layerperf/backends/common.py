"""What every backend shares, so that a new one writes only what is its own.

- :func:`interleaved`: the measured runs, each profiled run after a plain one (profiler off), both
  timed on two clocks (:class:`RunTimes`);
- :func:`unknown_flops_warnings`: the warning naming the op types whose FLOPs the cost model lacks.

The model's inputs as input specs are the model source's (:func:`layerperf.models.inputs.onnx_input_specs`).

Why plain and profiled runs alternate: measuring the plain latency after the profiled runs let drift
on a shared machine (another process, a throttled vCPU) land on one side only: the overhead ratio
then read below 1. Taking the two in small alternating blocks spreads drift over both, and the ratio
of their medians is the profiler's cost alone.

Each run is read on two clocks: wall time, and the calling thread's CPU time. On a busy host the
thread is preempted for part of a run, which wall time counts and CPU time does not; their ratio
says how busy the host was.
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from layerperf import __version__
from layerperf.backends.base import RunPlan
from layerperf.data.machine import Machine
from layerperf.data.metadata import PLAN_FIELDS, BackendOptions, Metadata, ModelInfo, now, split_options

if TYPE_CHECKING:
    from layerperf.models.source import ModelSource

Clock = Callable[[], int]

# Runs per side before switching. One keeps the two sides closest in time; a session's first run
# after the other one ran sees the other's weights in cache, but so does every run on both sides.
BLOCK_RUNS = 1


@dataclass(slots=True)
class RunTimes:
    """Whole runs of a model, one entry per run: wall time and the calling thread's CPU time, in ns."""

    wall_ns: list[int] = field(default_factory=list)
    cpu_ns: list[int] = field(default_factory=list)

    def take(self, call: Callable[[], object], n: int, clock: Clock, cpu_clock: Clock) -> None:
        for _ in range(n):
            c0, t0 = cpu_clock(), clock()
            call()
            t1, c1 = clock(), cpu_clock()
            self.wall_ns.append(t1 - t0)
            self.cpu_ns.append(c1 - c0)


def timed(call: Callable[[], object], n: int, clock: Clock = time.perf_counter_ns) -> list[int]:
    """Wall time of ``n`` calls in ns, one reading per call."""
    out = RunTimes()
    out.take(call, n, clock, clock)
    return out.wall_ns


def interleaved(plain: Callable[[], object] | None, profiled: Callable[[], object], runs: int, *,
                block: int = BLOCK_RUNS, clock: Clock = time.perf_counter_ns,
                cpu_clock: Clock = time.thread_time_ns, done: Callable[[int], None] | None = None,
                between: Callable[[int], None] | None = None) -> tuple[RunTimes, RunTimes]:
    """``runs`` timed calls of ``profiled``, each block of ``block`` after as many of ``plain``:
    (plain, profiled) times. ``plain`` None (latency not asked): the profiled calls alone, and no
    plain times. ``done(n)`` is told the profiled calls made so far after each block.

    ``between(n)`` (:attr:`RunPlan.between_runs`), when given, is called outside the timed calls:
    before the first block with 0, then after each block with the profiled calls made so far, so
    that what it reads (the dataset collector's CPU-speed yardstick) brackets every block."""
    if block < 1:
        raise ValueError(f"block must be at least 1, got {block}")
    plain_t, profiled_t = RunTimes(), RunTimes()
    if between is not None:
        between(0)
    while len(profiled_t.wall_ns) < runs:
        n = min(block, runs - len(profiled_t.wall_ns))
        if plain is not None:
            plain_t.take(plain, n, clock, cpu_clock)
        profiled_t.take(profiled, n, clock, cpu_clock)
        if between is not None:
            between(len(profiled_t.wall_ns))
        if done is not None:
            done(len(profiled_t.wall_ns))
    return plain_t, profiled_t


# -- the profile's metadata ------------------------------------------------------------------------------
# The run plan's fields the torch and toy backends have recorded since layerperf 0.1 (ONNX Runtime records
# all of :data:`PLAN_FIELDS`): kept, so that their traces keep their keys.
CORE_PLAN_FIELDS = ("warmup", "runs", "threads", "seed", "shapes")


def profile_metadata(source: ModelSource | Mapping[str, Any], plan: RunPlan, backend: str, version: str,
                     provider: str | None, options: Any, *, plan_fields: Sequence[str] = PLAN_FIELDS,
                     omit: Sequence[str] = ()) -> Metadata:
    """The metadata of a profile, as every backend builds it: the model (``source``: its file, or a
    description — name, path... — of a model that is none), the backend's name and version and the
    provider or target it ran on, the fields of the run ``plan`` named in ``plan_fields``, the backend's
    own ``options`` (its options dataclass, or a mapping of option -> value) less those in ``omit``
    (recorded elsewhere: torch's device is the provider), this machine, layerperf's version, the time
    and the process."""
    model = ModelInfo.from_json(source if isinstance(source, Mapping) else source.describe())
    if not isinstance(source, Mapping) and source.zoo:
        model = dataclasses.replace(model, zoo_options=dict(plan.zoo_options))
    own = {k: v for k, v in BackendOptions.of(backend, options).as_dict().items() if k not in omit}
    # one split for what is built and what is loaded back: the plan's fields, then the backend's own
    recorded, own_options = split_options(backend, {**{k: getattr(plan, k) for k in plan_fields}, **own})
    return Metadata(model=model, backend=backend, backend_version=version, provider=provider, plan=recorded,
                    options=own_options, machine=Machine.here(), layerperf_version=__version__, created=now(),
                    pid=os.getpid())


def unknown_flops_warnings(op_types: Iterable[str], what: str = "op types") -> list[str]:
    """The profile's warning naming the op types (sorted, once each) whose FLOPs the cost model does
    not know; none when there are none. ``what`` says what they are ("aten ops", ...)."""
    unknown = sorted(set(op_types))
    return [f"FLOPs unknown for {what}: {', '.join(unknown)}"] if unknown else []
