"""The PyTorch backend on an NVIDIA GPU (``--torch-device cuda``). Written for a GPU, not yet run on one.

* Device time per module: a pair of ``torch.cuda.Event(enable_timing=True)`` recorded on the current
  stream at each module's boundaries, one more pair around the pass; the device is synchronized once
  after each pass, then every pair's ``elapsed_time`` is read. A module's time is the device time
  between its boundaries on that stream: the kernels its forward queued, and any gap the host left.
* Memory per module from the caching allocator's counters: ``memory_allocated`` at each boundary, and
  its peak while the module ran from ``max_memory_allocated``, reset at every boundary and folded into
  each module still open, so nested modules each get their own peak. They land in ``Layer.memory``
  (``cuda_allocated_delta_bytes``, ``cuda_peak_allocated_bytes``, ``cuda_peak_rise_bytes``).
* At level 2, the kernels each module's ops launched (:func:`kernel_ops`), from torch.profiler with
  ``ProfilerActivity.CUDA``: a kernel is linked to the op that launched it by its correlation id.

Everything that touches torch.cuda goes through :class:`CudaApi`, so the pairing and the arithmetic
are tested with fakes on a machine with no GPU.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from layerperf.errors import InputError
from layerperf.profile_data import Run, Span

if TYPE_CHECKING:
    from layerperf.backends.base import RunPlan
    from layerperf.backends.torch.driver import Session
    from layerperf.backends.torch.models import TorchModel
    from layerperf.profile_data import Layer

DEVICES = ("cpu", "cuda")
MEMORY_KEYS = ("cuda_allocated_delta_bytes", "cuda_peak_allocated_bytes", "cuda_peak_rise_bytes")


class Event(Protocol):
    def record(self) -> None: ...

    def elapsed_time(self, end: Any) -> float: ...  # milliseconds, as torch.cuda.Event gives them


@dataclass(frozen=True, slots=True)
class CudaApi:
    """The torch.cuda calls the device path makes; :meth:`real` gives torch's own."""

    event: Callable[[], Event]
    synchronize: Callable[[], None]
    allocated: Callable[[], int]
    max_allocated: Callable[[], int]
    reset_peak: Callable[[], None]

    @classmethod
    def real(cls) -> CudaApi:
        import torch

        return cls(event=lambda: torch.cuda.Event(enable_timing=True), synchronize=torch.cuda.synchronize,
                   allocated=torch.cuda.memory_allocated, max_allocated=torch.cuda.max_memory_allocated,
                   reset_peak=torch.cuda.reset_peak_memory_stats)


def check_device(device: str) -> None:
    """``device`` is one this backend runs on here; cuda only where torch sees a GPU (one line if not)."""
    if device not in DEVICES:
        raise InputError(f"--torch-device must be cpu or cuda, got {device!r}")
    if device == "cuda":
        import torch

        if not torch.cuda.is_available():
            built = torch.version.cuda
            raise InputError(f"--torch-device cuda: torch.cuda.is_available() is False (torch {torch.__version__}, "
                             + (f"built for CUDA {built}: no usable GPU or driver)" if built else
                                "a build without CUDA)"),
                             hint="profile on the CPU (--torch-device cpu), or install a CUDA build of torch")


def device_name(device: str) -> str:
    """The allocator's name of ``device``: "cpu", or "cuda:N" for the current GPU."""
    if device != "cuda":
        return device
    import torch

    return f"cuda:{torch.cuda.current_device()}"


def to_device(model: TorchModel, device: str) -> TorchModel:
    """``model`` with its module and every input tensor on ``device``."""
    from dataclasses import replace

    import torch
    from torch.utils._pytree import tree_map

    def move(x: Any) -> Any:
        return x.to(device) if isinstance(x, torch.Tensor) else x

    return replace(model, module=model.module.to(device), args=tree_map(move, model.args),
                   kwargs=tree_map(move, model.kwargs))


@dataclass(slots=True)
class _Open:
    layer: int
    start: Any  # the event recorded at its start
    allocated: int
    peak: int


@dataclass(frozen=True, slots=True)
class Call:
    """One module call on the device: its events, and the allocator's figures across it."""

    layer: int
    start: Any
    end: Any
    allocated_start: int
    allocated_end: int
    peak: int  # the most bytes allocated at any moment while it ran


@dataclass(slots=True)
class _Pass:
    host_start_ns: int
    start: Any
    tid: int
    end: Any = None
    calls: list[Call] = field(default_factory=list)


class CudaEvents:
    """A collector (see :mod:`layerperf.collectors.boundary`) of device time and allocator figures at
    module boundaries; :meth:`runs` synchronizes once and reads every pair of events."""

    def __init__(self, api: CudaApi | None = None, clock: Callable[[], int] = time.perf_counter_ns) -> None:
        self.api = api or CudaApi.real()
        self._clock = clock
        self._open: list[_Open] = []
        self._passes: list[_Pass] = []

    def _event(self) -> Any:
        ev = self.api.event()
        ev.record()
        return ev

    def _fold_peak(self) -> None:
        """The allocator's peak since the last boundary into every open call; then a fresh peak."""
        peak = self.api.max_allocated()
        for frame in self._open:
            frame.peak = max(frame.peak, peak)
        self.api.reset_peak()

    def begin_pass(self) -> None:
        self.api.reset_peak()
        self._open = []
        self._passes.append(_Pass(self._clock(), self._event(), threading.get_native_id()))

    def start(self, layer: int) -> None:
        self._fold_peak()
        now = self.api.allocated()
        self._open.append(_Open(layer, self._event(), now, now))

    def stop(self, layer: int) -> None:
        end = self._event()
        self._fold_peak()
        if not self._open or self._open[-1].layer != layer:
            return  # a boundary of a call that began outside the pass: nothing to pair it with
        frame = self._open.pop()
        self._passes[-1].calls.append(Call(layer, frame.start, end, frame.allocated, self.api.allocated(),
                                           frame.peak))

    def end_pass(self) -> None:
        self._passes[-1].end = self._event()

    def runs(self) -> list[Run]:
        """Every pass as a Run: spans at their device offsets from the pass's start event (one
        synchronization for them all); runs placed at their host start, from the first pass's."""
        self.api.synchronize()
        out = []
        origin = self._passes[0].host_start_ns if self._passes else 0
        for p in self._passes:
            spans = [Span(c.layer, _ns(p.start, c.start), _ns(c.start, c.end), p.tid) for c in p.calls]
            run_start = p.host_start_ns - origin
            spans = [Span(s.layer, run_start + s.start_ns, s.dur_ns, s.tid) for s in spans]
            out.append(Run(run_start, _ns(p.start, p.end), sorted(spans, key=lambda s: s.start_ns)))
        return out

    def memory(self, n_layers: int) -> list[dict[str, int]]:
        """Per layer, the allocator's figures of its last call (the runs after warm-up agree; the
        first would not): bytes allocated across it, the peak while it ran, and the rise to it."""
        out: list[dict[str, int]] = [{} for _ in range(n_layers)]
        for p in self._passes:
            for c in p.calls:
                out[c.layer] = {"cuda_allocated_delta_bytes": c.allocated_end - c.allocated_start,
                                "cuda_peak_allocated_bytes": c.peak, "cuda_peak_rise_bytes": c.peak - c.allocated_start}
        return out


def _ns(start: Any, end: Any) -> int:
    return round(start.elapsed_time(end) * 1e6)  # ms -> ns


def timed_runs(session: Session, index: dict[int, int], plan: RunPlan,
               progress: Callable[[str, int, int], None] | None, api: CudaApi | None = None) -> tuple[CudaEvents, Any]:
    """``plan.runs`` hooked passes timed on the device; with ``plan.latency`` a plain call before each,
    timed on the host up to a synchronization (the device's work included)."""
    from layerperf.backends.torch.driver import interleaved

    events = CudaEvents(api)
    sync = events.api.synchronize

    def synced() -> None:
        session.call()
        sync()

    sync()
    return events, interleaved(session, index, plan, events, synced, progress, "profiled runs (cuda)")


def fill_memory(layers: Sequence[Layer], events: CudaEvents) -> None:
    """The allocator's figures into each layer's ``memory`` (kept with the runtime's own figures)."""
    for layer, figures in zip(layers, events.memory(len(layers)), strict=True):
        layer.memory.update(figures)


@dataclass(frozen=True, slots=True)
class Kernel:
    """One kernel a module's op launched: its module's layer name (None: the model's own code)."""

    module: str | None
    name: str
    start_us: float
    dur_us: float
    stream: int


def kernels(events: Sequence[Any], module_of: Callable[[Any], str | None]) -> list[Kernel]:
    """The device kernels among torch.profiler's ``events``, each under the module of the op that
    launched it (``module_of``: the op's module, see ops._kernel_ops)."""
    from torch.autograd import DeviceType

    by_id = {e.id: e for e in events if e.device_type == DeviceType.CPU}
    out = []
    for e in events:
        if e.device_type != DeviceType.CUDA:
            continue
        launcher = by_id.get(e.linked_correlation_id)
        module = module_of(launcher) if launcher is not None else None
        out.append(Kernel(module, e.name, e.time_range.start, e.time_range.end - e.time_range.start, int(e.thread)))
    return out
