"""Measure this machine's peaks on ONNX Runtime: what ``layerperf calibrate`` runs.

Each kernel is a one-node model built by :func:`layerperf.bench.build.build_op` (the op schema and
opset probing ``bench`` uses), run through the backend's single-operator capability, found in the
registry as ``bench`` finds it (:class:`layerperf.backends.base.SingleOp`: inputs and outputs bound
once, so a call is the kernel and nothing else), its work counted by the cost model
(:func:`layerperf.cost.of`: one multiply-add is 2 FLOPs, or 2 integer ops, as everywhere in
layerperf; bytes are those read plus those written):

* float32 FLOP/s: a large square MatMul and a large 3x3 Conv;
* int8 integer ops/s: MatMulInteger (uint8 x int8 -> int32) and QLinearMatMul (requantized to uint8;
  its requantization is float work and not in its integer rate);
* memory bandwidth: a copy (Identity) and an Add over arrays well above the last-level cache.

How a rate is taken: ``bench``'s timing loop (a warm-up, then ``repeats`` timed repeats, each a
batch of back-to-back calls lasting at least ``min_repeat_s``; a repeat during which this process's
threads waited for a CPU is set aside and replaced), ``rounds`` times over every kernel and thread
count, so that a burst of noise lasting seconds spoils one round, not every repeat of a kernel. The
rate of a repeat is the work of its calls over its time; the peak is the best repeat. The best, not
the median, because the host's noise (other tenants, other processes) only ever slows a kernel down:
the fastest repeat is the one least disturbed, and a repeat of a fifth of a second is a sustained
rate, not a burst. The median is kept beside it to show how noisy the run was.
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from layerperf import backends
from layerperf import cost as cost_model
from layerperf.bench.measure import MeasureOptions, run_queue_wait_ns
from layerperf.bench.measure import measure as measure_samples
from layerperf.bench.runtime import runner, runtime_options
from layerperf.calibration.peaks import Peaks
from layerperf.data.machine import fingerprint
from layerperf.data.tensor import TensorInfo
from layerperf.errors import InputError

if TYPE_CHECKING:
    from layerperf.bench.build import OneNode

Clock = Callable[[], int]
FLOPS, INT_OPS, BYTES = "flops", "int_ops", "bytes"  # what a kernel's rate counts
BACKEND = "onnxruntime"  # the runtime whose peaks are measured, by its name in the registry
PROVIDER = "CPUExecutionProvider"
OPT_LEVEL = "all"  # as `layerperf profile` runs models: a Conv runs in ONNX Runtime's NCHWc layout


@dataclass(frozen=True, slots=True)
class Sizes:
    """How large each kernel's tensors are."""

    matmul_n: int  # float32 MatMul: n x n times n x n
    conv_channels: int  # Conv: 1 x C x hw x hw, C filters of 3x3, padded to keep hw
    conv_hw: int
    int8_n: int  # MatMulInteger and QLinearMatMul: n x n times n x n
    stream_bytes: int  # each array of the copy and the Add


def last_level_cache_bytes(caches: Path = Path("/sys/devices/system/cpu/cpu0/cache")) -> int | None:
    """The largest CPU cache this machine reports (sysfs), None when it reports none."""
    sizes = []
    for index in caches.glob("index*"):
        try:
            text = (index / "size").read_text().strip()
        except OSError:
            continue
        scale = {"K": 2**10, "M": 2**20, "G": 2**30}.get(text[-1:].upper(), 1)
        digits = text.rstrip("KMGkmg")
        if digits.isdigit():
            sizes.append(int(digits) * scale)
    return max(sizes) if sizes else None


def stream_bytes_for(llc_bytes: int | None) -> int:
    """Twice the last-level cache, at least 64 MiB: no array of the bandwidth kernels fits in a cache."""
    return max(2 * (llc_bytes or 0), 64 * 2**20)


def full_sizes(stream_bytes: int | None = None) -> Sizes:
    return Sizes(matmul_n=2048, conv_channels=256, conv_hw=56, int8_n=2048,
                 stream_bytes=stream_bytes or stream_bytes_for(last_level_cache_bytes()))


QUICK_SIZES = Sizes(matmul_n=128, conv_channels=16, conv_hw=16, int8_n=128, stream_bytes=2**20)


@dataclass(frozen=True, slots=True)
class Settings:
    """What to measure and how long."""

    threads: tuple[int, ...]
    sizes: Sizes
    repeats: int = 5  # per round
    rounds: int = 2  # every kernel at every thread count, then again: a burst of noise spoils one round's
    min_repeat_s: float = 0.2  # each timed repeat lasts at least this long
    warmup_s: float = 0.3  # untimed calls before the repeats, at most
    max_wait_fraction: float | None = 0.05  # a repeat whose threads waited this much for a CPU is set aside
    seed: int = 0
    quick: bool = False


def default_threads(cores: int | None = None) -> tuple[int, ...]:
    """1 and each power of two up to the core count, and the core count itself."""
    n = cores if cores is not None else (os.cpu_count() or 1)
    out = [1 << k for k in range(n.bit_length()) if 1 << k <= n]
    return tuple(sorted(set(out) | {n}))


def parse_threads(text: str) -> tuple[int, ...]:
    """``"1,2"`` -> (1, 2); InputError for anything but positive integers."""
    out = []
    for part in text.split(","):
        part = part.strip()
        if not part.isdigit() or int(part) < 1:
            raise InputError(f"--threads {text}: '{part}' is not a positive integer", hint="e.g. --threads 1,2")
        out.append(int(part))
    return tuple(sorted(set(out)))


def settings_for(*, threads: Sequence[int] | None = None, quick: bool = False,
                 stream_bytes: int | None = None) -> Settings:
    """The full run (peaks) or ``quick`` (small sizes, a few short repeats: a smoke test, not peaks)."""
    chosen = tuple(threads) if threads else default_threads()
    if quick:
        sizes = QUICK_SIZES if stream_bytes is None else replace(QUICK_SIZES, stream_bytes=stream_bytes)
        return Settings(threads=chosen, sizes=sizes, repeats=3, rounds=1, min_repeat_s=0.005, warmup_s=0.0,
                        max_wait_fraction=None, quick=True)
    return Settings(threads=chosen, sizes=full_sizes(stream_bytes))


# -- the kernels ---------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Kernel:
    name: str
    kind: str  # FLOPS, INT_OPS or BYTES
    build: Callable[[Sizes, np.random.Generator], OneNode]


def _int8(shape: tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
    return rng.integers(-128, 128, shape, dtype=np.int8)


def _scalar(value: float, dtype: type) -> np.ndarray:
    return np.asarray(value, dtype=dtype)


def _matmul(s: Sizes, rng: np.random.Generator) -> OneNode:
    from layerperf.bench.build import build_op

    n = s.matmul_n  # B a constant, as a layer's weights: ONNX Runtime pre-packs it once
    return build_op("MatMul", {"A": (n, n), "B": rng.standard_normal((n, n), dtype=np.float32)})


def _conv(s: Sizes, rng: np.random.Generator) -> OneNode:
    from layerperf.bench.build import build_op

    c, hw = s.conv_channels, s.conv_hw
    w = rng.standard_normal((c, c, 3, 3), dtype=np.float32)
    return build_op("Conv", {"X": (1, c, hw, hw), "W": w}, {"pads": "1,1,1,1"})


def _matmul_integer(s: Sizes, rng: np.random.Generator) -> OneNode:
    from layerperf.bench.build import build_op

    n = s.int8_n
    return build_op("MatMulInteger", {"A": ((n, n), "uint8"), "B": _int8((n, n), rng)})


def _qlinear_matmul(s: Sizes, rng: np.random.Generator) -> OneNode:
    from layerperf.bench.build import build_op

    n = s.int8_n
    return build_op("QLinearMatMul", {
        "a": ((n, n), "uint8"), "a_scale": _scalar(0.02, np.float32), "a_zero_point": _scalar(128, np.uint8),
        "b": _int8((n, n), rng), "b_scale": _scalar(0.02, np.float32), "b_zero_point": _scalar(0, np.int8),
        "y_scale": _scalar(1.0, np.float32), "y_zero_point": _scalar(128, np.uint8)})


def _stream_shape(s: Sizes) -> tuple[int, int]:
    # 2-D, rows of 1024 float32: ONNX shape inference's data propagation treats a 1-D tensor as a
    # shape and spends hundreds of bytes per element on it (15 GB for 64M elements)
    return max(1, s.stream_bytes // 4096), 1024


def _copy(s: Sizes, rng: np.random.Generator) -> OneNode:
    from layerperf.bench.build import build_op

    return build_op("Identity", {"input": _stream_shape(s)})


def _add(s: Sizes, rng: np.random.Generator) -> OneNode:
    from layerperf.bench.build import build_op

    return build_op("Add", {"A": _stream_shape(s), "B": _stream_shape(s)})


KERNELS: tuple[Kernel, ...] = (
    Kernel("MatMul fp32", FLOPS, _matmul),
    Kernel("Conv fp32", FLOPS, _conv),
    Kernel("MatMulInteger int8", INT_OPS, _matmul_integer),
    Kernel("QLinearMatMul int8", INT_OPS, _qlinear_matmul),
    Kernel("copy (Identity)", BYTES, _copy),
    Kernel("Add fp32", BYTES, _add),
)
KIND = {k.name: k.kind for k in KERNELS}
UNIT = {FLOPS: "FLOP/s", INT_OPS: "OP/s", BYTES: "B/s"}


# -- timing ---------------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Timed:
    """Per-call times of the repeats kept for one kernel, in ns; the calls in each repeat; and how many
    repeats were set aside because this process's threads waited for a CPU during them."""

    per_call_ns: tuple[float, ...]
    loops: int
    set_aside: int = 0

    @property
    def best_ns(self) -> float:
        return min(self.per_call_ns)

    @property
    def median_ns(self) -> float:
        return statistics.median(self.per_call_ns)

    def then(self, other: Timed) -> Timed:
        """This and a later round's repeats together."""
        return Timed(self.per_call_ns + other.per_call_ns, other.loops, self.set_aside + other.set_aside)


def time_repeats(call: Callable[[], object], settings: Settings, *, clock: Clock = time.perf_counter_ns,
                 waited: Callable[[], int | None] | None = None) -> Timed:
    """``bench``'s timing loop (:func:`layerperf.bench.measure.measure`): a warm-up of up to ``warmup_s``,
    then ``repeats`` repeats of back-to-back calls lasting ``min_repeat_s`` or more each; a repeat during
    which this process's threads waited in the run queue for more than ``max_wait_fraction`` of it
    (``waited``: their total wait in ns; default /proc's schedstat) is set aside and replaced, up to 4x
    the repeats asked. No speed yardstick: the best repeat is what is kept, and a slowed one is never it."""
    opts = MeasureOptions(samples=settings.repeats, min_time_ms=settings.min_repeat_s * 1e3,
                          warmup_max_s=settings.warmup_s, max_wait_fraction=settings.max_wait_fraction,
                          speed_wait_s=0.0)
    timing = measure_samples(call, opts, clock=clock, waited=waited or run_queue_wait_ns, ruler=lambda _clock: 0.0)
    return Timed(timing.per_call_ns, timing.loops, len(timing.disturbed_ns))


@dataclass(frozen=True, slots=True)
class Measured:
    """One kernel at one thread count: its work per call and its best and median rate."""

    kernel: str
    kind: str
    threads: int
    work: float  # per call: FLOPs, integer ops or bytes read + written
    shapes: str
    ran: str  # the kernels ONNX Runtime ran for the node
    timed: Timed

    @property
    def rate(self) -> float:
        return self.work / (self.timed.best_ns * 1e-9)

    @property
    def median_rate(self) -> float:
        return self.work / (self.timed.median_ns * 1e-9)

    def then(self, other: Measured) -> Measured:
        return replace(self, timed=self.timed.then(other.timed))

    def row(self) -> dict[str, Any]:
        return {"kernel": self.kernel, "kind": self.kind, "threads": self.threads, "rate": self.rate,
                "median_rate": self.median_rate, "work": self.work, "best_us": self.timed.best_ns / 1e3,
                "repeats": len(self.timed.per_call_ns), "set_aside": self.timed.set_aside,
                "loops": self.timed.loops, "shapes": self.shapes, "ran": self.ran}


def _work(kind: str, one: OneNode, outputs: tuple[TensorInfo, ...]) -> float:
    cost = cost_model.of(one.domain, one.op_type, one.inputs, outputs, one.attrs)
    amount = {FLOPS: cost.flops, INT_OPS: cost.int_ops,
              BYTES: None if cost.bytes_read is None or cost.bytes_written is None
              else cost.bytes_read + cost.bytes_written}[kind]
    if not amount:  # every kernel here is covered by the cost model: anything else is a bug, not a 0
        raise RuntimeError(f"the cost model counts no {kind} for {one.op_type}")
    return float(amount)


def measure(kernel: Kernel, settings: Settings, threads: Sequence[int],
            clock: Clock = time.perf_counter_ns) -> list[Measured]:
    """``kernel`` at each thread count: one model (built once), one session per thread count."""
    single_op, options = runner(BACKEND), runtime_options(BACKEND, OPT_LEVEL, PROVIDER)
    one = kernel.build(settings.sizes, np.random.default_rng(settings.seed))
    shapes = " ".join("x".join(map(str, t.shape)) for t in one.inputs if t is not None and t.shape)
    out = []
    for t in threads:
        prepared = single_op.prepare(one.model, one.feed, threads=t, options=options)
        work = _work(kernel.kind, one, prepared.outputs)
        timed = time_repeats(prepared.call, settings, clock=clock)
        ran = "+".join(k.op_type for k in prepared.kernels)
        out.append(Measured(kernel.name, kernel.kind, t, work, shapes, ran, timed))
        del prepared  # one session's buffers at a time: the bandwidth arrays are large
    return out


def peaks_of(measured: Sequence[Measured], *, cpu_model: str, cores: int, onnxruntime: str,
             measured_at: str, quick: bool = False) -> Peaks:
    """The best kernel of each kind per thread count, and every kernel's rate."""
    by_kind: dict[str, dict[int, float]] = {FLOPS: {}, INT_OPS: {}, BYTES: {}}
    kernels: dict[str, dict[int, float]] = {}
    for m in measured:
        kernels.setdefault(m.kernel, {})[m.threads] = m.rate
        best = by_kind[m.kind]
        best[m.threads] = max(best.get(m.threads, 0.0), m.rate)
    return Peaks(cpu_model=cpu_model, cores=cores, flops_per_s=by_kind[FLOPS], int_ops_per_s=by_kind[INT_OPS],
                 bytes_per_s=by_kind[BYTES], kernels=kernels, measured_at=measured_at, onnxruntime=onnxruntime,
                 quick=quick)


def calibrate(settings: Settings, progress: Callable[[str], None] | None = None,
              kernels: Sequence[Kernel] = KERNELS) -> tuple[Peaks, list[Measured]]:
    """Measure every kernel at every thread count of ``settings``, ``rounds`` times over; the peaks (not
    saved) and each measurement (its rounds' repeats together)."""
    from layerperf.bench.api import prime_runtime  # lazy: bench's API loads onnx, which --show does without

    prime_runtime(BACKEND, PROVIDER)
    merged: dict[tuple[str, int], Measured] = {}
    for r in range(settings.rounds):
        for kernel in kernels:
            if progress is not None:
                progress(f"round {r + 1} of {settings.rounds}: {kernel.name} at "
                         f"{', '.join(map(str, settings.threads))} threads")
            for m in measure(kernel, settings, settings.threads):
                key = (m.kernel, m.threads)
                merged[key] = merged[key].then(m) if key in merged else m
    measured = list(merged.values())
    fp = fingerprint()
    when = datetime.now(timezone.utc).isoformat(timespec="seconds")
    version = backends.get(BACKEND).availability().version
    peaks = peaks_of(measured, cpu_model=str(fp["cpu"]), cores=int(fp["cores"] or 0), onnxruntime=str(version),
                     measured_at=when, quick=settings.quick)
    return peaks, measured
