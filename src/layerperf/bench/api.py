"""``bench_op`` and ``bench_node``: measure one operator, or one node of a model, in isolation.

The runtime is a backend's single-operator capability (:class:`layerperf.backends.base.SingleOp`),
found by name in the registry: it builds and binds the one-node model, and this module's timing
loop (:mod:`.measure`) times the call it gives.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import onnx

from layerperf import backends
from layerperf import cost as cost_model
from layerperf.backends.base import Kernel, PreparedOp, RunPlan, SingleOp
from layerperf.bench import speed
from layerperf.bench.build import InputLike, OneNode, build_op
from layerperf.bench.counting import count_per_call
from layerperf.bench.extract import extract_node
from layerperf.bench.measure import DEFAULT_SAMPLES, DEFAULT_SPEED_WAIT_S, MeasureOptions, Samples, measure
from layerperf.bench.peak_rss import PeakMemory
from layerperf.bench.result import BenchResult
from layerperf.bench.runtime import AS_WRITTEN, runner, runtime_options
from layerperf.bench.stats import NOISY_CV, deciles_us, describe
from layerperf.collectors.perf import CounterRequest, event_names
from layerperf.cost import Cost
from layerperf.data.tensor import TensorInfo

# An empty run costing more than this share of the op's time is worth a warning.
OVERHEAD_SHARE_WARN = 0.1
# The CPU-speed yardstick's p90 beyond this multiple of its p10: the samples mix two speeds.
YARDSTICK_SPREAD_WARN = 1.4


MAX_WAIT_FRACTION = 0.05  # a sample that waited for a CPU longer than this share of it is set aside


@dataclass(frozen=True, slots=True)
class BenchSettings:
    """How to run and time: shared by single measurements and every row of a sweep."""

    threads: int = 1
    samples: int = DEFAULT_SAMPLES
    min_time_ms: float = 1.0
    opt_level: str = "basic"
    provider: str = "CPUExecutionProvider"
    events: tuple[str, ...] = ()
    warmup_max_s: float = 2.0
    overhead: bool = True  # also time an empty run (reported, never subtracted)
    max_wait_fraction: float | None = MAX_WAIT_FRACTION
    speed_wait_s: float = DEFAULT_SPEED_WAIT_S  # sample this much longer for full-speed samples (0: no speed check)
    backend: str = backends.DEFAULT  # the runtime, by its name in the registry

    def measure_options(self) -> MeasureOptions:
        return MeasureOptions(samples=self.samples, min_time_ms=self.min_time_ms, warmup_max_s=self.warmup_max_s,
                              max_wait_fraction=self.max_wait_fraction, speed_wait_s=self.speed_wait_s,
                              speed_reference_ns=speed.reference_ns() if self.speed_wait_s > 0 else None)

    def validate(self) -> None:
        """The backend and its options are checked as `layerperf profile` checks them, then the timing options."""
        RunPlan(threads=self.threads).validate()
        self.runtime_options()
        self.measure_options().validate()

    def with_threads(self, threads: int) -> BenchSettings:
        return dataclasses.replace(self, threads=threads)

    def runner(self) -> SingleOp:
        """The backend's single-operator capability; InputError when it has none or cannot run here."""
        return runner(self.backend)

    def runtime_options(self, opt_level: str | None = None) -> Any:
        """The backend's options for one op at ``opt_level`` (default this one's), checked."""
        return runtime_options(self.backend, opt_level or self.opt_level, self.provider)


@functools.lru_cache(maxsize=8)
def prime_runtime(backend: str, provider: str) -> None:
    """Run one tiny model, once per process, backend and provider, before any memory is measured.

    A runtime allocates its global state (ONNX Runtime: its environment, kernel registry, default
    arenas) on its first session; without this the first measurement of a process would be charged
    for it.
    """
    _empty_op(backend, provider, threads=1).call()


def _empty_op(backend: str, provider: str, threads: int) -> PreparedOp:
    """An Identity on one element, prepared as written: the least a call of the runtime does."""
    one = build_op("Identity", {"input": (1,)})
    return runner(backend).prepare(one.model, one.feed, threads=threads,
                                   options=runtime_options(backend, AS_WRITTEN, provider))


def empty_run_us(settings: BenchSettings) -> float:
    """Median time of running an Identity on one element: the floor under any op's time."""
    prepared = _empty_op(settings.backend, settings.provider, settings.threads)
    opts = dataclasses.replace(settings.measure_options(), samples=max(5, settings.samples // 3),
                               warmup_max_s=min(settings.warmup_max_s, 0.5),
                               speed_wait_s=min(settings.speed_wait_s, 0.5))  # a side figure: waits less
    return describe(measure(prepared.call, opts).per_call_ns).median_us


def _warnings(one: OneNode, kernels: tuple[Kernel, ...], timing: Samples, cost: Cost, overhead_us: float | None,
              settings: BenchSettings, memory_source: str) -> tuple[str, ...]:
    out = []
    if len(kernels) != 1:
        ops = ", ".join(k.op_type for k in kernels)
        out.append(f"{settings.backend} ran {len(kernels)} kernels for this op ({ops}); the time covers all "
                   f"of them (--opt-level {settings.opt_level})")
    if cost.flops is None:
        out.append(f"FLOPs unknown for {one.domain + '.' if one.domain else ''}{one.op_type}")
    st = describe(timing.per_call_ns)
    if st.noisy:
        out.append(f"CV {st.cv:.1%} is above {NOISY_CV:.0%}: these timings vary too much to be trusted; "
                   "take more --samples, a longer --min-time, or a quieter machine")
    if not timing.warmup_settled:
        out.append(f"warm-up stopped after {timing.warmup_s:.1f} s without the timings settling")
    if timing.slowed_used:
        ref = f" ({timing.speed_reference_ns / 1e3:.1f} µs at full speed)" if timing.speed_reference_ns else ""
        out.append(f"the CPU ran slowed{ref} through most of this run, beyond the {settings.speed_wait_s:g} s "
                   f"it waited for its full speed: {timing.slowed} of the {len(timing.per_call_ns)} samples used "
                   "were taken slowed; compare with care (--speed-wait)")
    if timing.used_disturbed:
        out.append(f"the machine is busy: {len(timing.disturbed_ns)} of {len(timing.per_call_ns)} samples waited "
                   "for a CPU while another process ran; they are included, so times are inflated")
    if timing.requested and len(timing.per_call_ns) < timing.requested:
        out.append(f"only {len(timing.per_call_ns)} of the {timing.requested} samples asked for came undisturbed "
                   f"and at full speed ({len(timing.disturbed_ns)} disturbed, {timing.slowed} slowed set aside): "
                   "the figures stand on those")
    if overhead_us is not None and overhead_us > OVERHEAD_SHARE_WARN * st.median_us:
        out.append(f"an empty run takes {overhead_us:.1f} µs, {overhead_us / st.median_us:.0%} of this op's "
                   f"median: the time includes that much Python and {settings.backend} call overhead")
    # Unchecked speed (--speed-wait 0): say when the samples ran at more than one.
    y = deciles_us(timing.yardstick_ns) if len(timing.yardstick_ns) >= 5 and not timing.speed_reference_ns else None
    if y is not None and y[0] > 0 and y[2] > YARDSTICK_SPREAD_WARN * y[0]:
        out.append(f"the CPU's speed changed during the samples: a fixed reference loop took {y[0]:.0f} "
                   f"to {y[2]:.0f} µs (p10-p90); something outside this system's view (e.g. another "
                   "tenant of a virtual machine's host) shares the core")
    if memory_source != "VmHWM":
        out.append("peak memory from ru_maxrss: a lower bound, 0 if the process peaked higher before")
    return tuple(out)


def _keep_real_shapes(ran: tuple[TensorInfo, ...], known: tuple[TensorInfo, ...]) -> tuple[TensorInfo, ...]:
    """The outputs a run reported, with the model's shapes the node's own outputs know (NCHWc padding)."""
    real = {t.name: t for t in known if t.padded}
    return tuple(dataclasses.replace(t, real_shape=real[t.name].real_shape)
                 if t.name in real and t.shape == real[t.name].shape else t for t in ran)


def measure_one(one: OneNode, settings: BenchSettings, *, run_opt_level: str | None = None,
                overhead_us: float | None = None) -> BenchResult:
    """Time ``one`` under ``settings`` and gather its cost, counters, memory and warnings.

    ``run_opt_level`` is the level the session runs at when it differs from the one reported (a node
    taken from an optimized graph is already optimized: it runs at "disable").
    """
    settings.validate()
    runner, options = settings.runner(), settings.runtime_options(run_opt_level)
    prime_runtime(settings.backend, settings.provider)
    memory = PeakMemory()
    memory.start()
    prepared = runner.prepare(one.model, one.feed, threads=settings.threads, options=options)
    timing = measure(prepared.call, settings.measure_options())
    peak = memory.stop()
    if timing.yardstick_ns and not timing.slowed_used:
        speed.remember(deciles_us(timing.yardstick_ns)[0] * 1e3)  # type: ignore[index]  # the run's own peak: counting passes come after, with buffers of their own
    counters: dict[str, float] = {}
    if settings.events:
        counters = count_per_call(prepared.call, timing.loops, settings.samples, settings.events)
    outputs, kernels = prepared.outputs, prepared.kernels
    del prepared  # free the session and its buffers before the empty-run measurement
    if settings.overhead and overhead_us is None:
        overhead_us = empty_run_us(settings)
    outputs = _keep_real_shapes(outputs, one.outputs)
    cost = cost_model.of(one.domain, one.op_type, one.inputs, outputs, one.attrs)
    return BenchResult(
        op_type=one.op_type, domain=one.domain, node_name=one.node_name, opset=one.opset, attrs=one.attrs,
        inputs=one.inputs, outputs=outputs, weights=one.weights, threads=settings.threads,
        opt_level=settings.opt_level, provider=settings.provider, kernels=kernels, timing=timing,
        cost=cost, peak_rss_delta_bytes=peak, memory_source=memory.source, overhead_us=overhead_us,
        counters=counters, source=one.source, backend=settings.backend,
        warnings=_warnings(one, kernels, timing, cost, overhead_us, settings, memory.source),
    )


def settings_from(threads: int = 1, samples: int = DEFAULT_SAMPLES, min_time_ms: float = 1.0, opt_level: str = "basic",
                  provider: str = "CPUExecutionProvider", events: Sequence[str] = (), warmup_max_s: float = 2.0,
                  overhead: bool = True, speed_wait_s: float = DEFAULT_SPEED_WAIT_S,
                  backend: str = backends.DEFAULT, set_aside: bool = True) -> BenchSettings:
    """``set_aside``: False keeps every sample, those that waited for a CPU or ran beside a slowed yardstick
    too (a co-runner sharing the op's cores: its interference is that waiting)."""
    s = BenchSettings(threads=threads, samples=samples, min_time_ms=min_time_ms, opt_level=opt_level,
                      provider=provider, events=tuple(event_names(events)), warmup_max_s=warmup_max_s,
                      overhead=overhead, speed_wait_s=speed_wait_s, backend=backend)
    s.runner()  # a backend that cannot measure one op is refused first, in one line
    s.validate()
    if not set_aside:  # the options as given were checked above
        s = dataclasses.replace(s, speed_wait_s=0.0, max_wait_fraction=None)
    if s.events:  # an unknown or unsupported event fails now, not after the timing
        request = CounterRequest.build(list(s.events), None)
        if request is not None:
            request.check()
    return s


def bench_op(op_type: str, inputs: Mapping[str, InputLike], attrs: Mapping[str, Any] | None = None, *,
             domain: str = "", opset: int | None = None, threads: int = 1, samples: int = DEFAULT_SAMPLES,
             min_time_ms: float = 1.0, opt_level: str = "basic", weights: str | Sequence[str] = "auto",
             outputs: int | None = None, events: Sequence[str] = (), provider: str = "CPUExecutionProvider",
             seed: int = 0, warmup_max_s: float = 2.0, overhead: bool = True,
             speed_wait_s: float = DEFAULT_SPEED_WAIT_S, backend: str = backends.DEFAULT) -> BenchResult:
    """Measure one operator in isolation on ``backend`` (ONNX Runtime by default; one whose
    ``single_op()`` is None is refused with an InputError).

    ``inputs`` maps the op's input names (from its ONNX schema: ``X``, ``W``, ``B`` for Conv) to dims
    (``"1x3x224x224"``, ``"1x64:float16"``, a tuple of ints, ``(dims, dtype)``) or to a numpy array
    for an input with fixed values (a Reshape's ``shape``). ``attrs`` values are typed by the schema
    (``{"pads": "1,1,1,1"}`` and ``{"pads": [1, 1, 1, 1]}`` are the same). Weights become
    initializers (``weights="auto"``; ``"inputs"`` feeds everything at run time).

    >>> r = bench_op("Conv", {"X": "1x64x56x56", "W": "64x64x3x3"}, {"pads": [1, 1, 1, 1]})
    >>> r.median_us, r.flops
    """
    settings = settings_from(threads, samples, min_time_ms, opt_level, provider, events, warmup_max_s, overhead,
                             speed_wait_s, backend)
    one = build_op(op_type, inputs, attrs, domain=domain, opset=opset, weights=weights, n_outputs=outputs,
                   seed=seed)
    return measure_one(one, settings)


def bench_node(model: str | Path | onnx.ModelProto, node: str, *, opt_level: str = "disable", threads: int = 1,
               samples: int = DEFAULT_SAMPLES, min_time_ms: float = 1.0, events: Sequence[str] = (),
               provider: str = "CPUExecutionProvider", shapes: Sequence[str] = (), seed: int = 0,
               batch: int | None = None, image_size: int | None = None, seq_len: int | None = None,
               warmup_max_s: float = 2.0, overhead: bool = True,
               speed_wait_s: float = DEFAULT_SPEED_WAIT_S, inputs: str | Path | None = None,
               backend: str = backends.DEFAULT) -> BenchResult:
    """Measure node ``node`` of ``model`` (a path, zoo name or ModelProto) alone, on ``backend``.

    By default the node is the model's own, as written (``opt_level="disable"``); at another level it
    is taken from the graph the runtime executes after its optimizations (names may then be fused
    ones, such as ``layer1.0.relu1_nchwc``, as ``layerperf profile --opt-level all`` shows). The node
    keeps its attributes, its weights and the very inputs it receives in one run of the model; it
    then runs alone, without further optimization. ``inputs`` (an .npz of arrays by input name) feeds
    that run; inputs it lacks get seeded random data. ``node`` is a name as ``layerperf profile`` shows
    it, unnamed nodes included (``<op_type>_<index>``, ONNX Runtime's profiler's name for them).
    """
    settings = settings_from(threads, samples, min_time_ms, opt_level, provider, events, warmup_max_s, overhead,
                             speed_wait_s, backend)
    zoo = {k: v for k, v in {"batch": batch, "image_size": image_size, "seq_len": seq_len}.items() if v is not None}
    one = extract_node(model, node, opt_level=opt_level, shapes=shapes, provider=provider, seed=seed,
                       inputs=inputs, backend=backend, **zoo)
    return measure_one(one, settings, run_opt_level=AS_WRITTEN)
