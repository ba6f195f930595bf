"""The PyTorch backend on an NVIDIA GPU (``--torch-device cuda``; run on an H100 with torch 2.11).

* Device time per module: an event recorded on the pass's stream at each module's boundaries
  (:class:`CudaEvents`: events from a pool, each boundary one ``cudaEventRecord``), one more pair around
  the pass; at the pass's end the device is synchronized once and every pair's ``elapsed_time`` read.
  A module's time is the device time between its boundaries on that stream: the kernels its forward
  queued, and any gap where the device waited for the host to queue the next (a launch-bound model's
  modules so read about their host time).
* Memory per module from the caching allocator's counters, in one more pass, untimed
  (:func:`.driver.allocator_pass`): ``memory_allocated`` at each boundary, and its peak while the module ran from
  ``max_memory_allocated``, reset at every boundary and folded into each module still open, so nested
  modules each get their own peak. They land in each layer's ``extension``
  (:class:`~layerperf.data.extension.CudaModuleMemory`: ``cuda_allocated_delta_bytes``,
  ``cuda_peak_allocated_bytes``, ``cuda_peak_rise_bytes``).
* At level 2, the kernels each module's ops launched (:func:`kernels`), from torch.profiler with
  ``ProfilerActivity.CUDA``: a kernel is linked to the op that launched it by its correlation id.

Everything that touches torch.cuda goes through :class:`CudaApi`, so the pairing and the arithmetic
are tested with fakes on a machine with no GPU too (tests/test_torch_cuda.py); tests/test_torch_gpu.py
runs the real thing where a GPU is.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Protocol

from layerperf.backends.torch.ranges import MARK
from layerperf.data.extension import CudaModuleMemory
from layerperf.data.profile import Run, Span

if TYPE_CHECKING:
    from layerperf.backends.torch.models import TorchModel
    from layerperf.data.profile import Layer

MEMORY_KEYS = ("cuda_allocated_delta_bytes", "cuda_peak_allocated_bytes", "cuda_peak_rise_bytes")


class Event(Protocol):
    def record(self) -> None: ...

    def elapsed_time(self, end: Any) -> float: ...  # milliseconds, as torch.cuda.Event gives them


def _default_recorder() -> Callable[[Any], None]:
    return lambda ev: ev.record()


@dataclass(frozen=True, slots=True)
class CudaApi:
    """The torch.cuda calls the device path makes; :meth:`real` gives torch's own. ``recorder`` gives,
    at a pass's start, the function that records an event on the current stream (bound to that stream
    once, so a boundary makes no Python stream object)."""

    event: Callable[[], Event]
    synchronize: Callable[[], None]
    allocated: Callable[[], int]
    max_allocated: Callable[[], int]
    reset_peak: Callable[[], None]
    recorder: Callable[[], Callable[[Any], None]] = _default_recorder

    @classmethod
    def real(cls) -> CudaApi:
        import torch

        def recorder() -> Callable[[Any], None]:
            stream, record = torch.cuda.current_stream(), torch._C._CudaEventBase.record
            return lambda ev: record(ev, stream)

        return cls(event=lambda: torch.cuda.Event(enable_timing=True), synchronize=torch.cuda.synchronize,
                   allocated=torch.cuda.memory_allocated, max_allocated=torch.cuda.max_memory_allocated,
                   reset_peak=torch.cuda.reset_peak_memory_stats, recorder=recorder)


def device_name(device: str) -> str:
    """The allocator's name of ``device``: "cpu", or "cuda:N" for the current GPU."""
    if device != "cuda":
        return device
    import torch

    return f"cuda:{torch.cuda.current_device()}"


def to_device(model: TorchModel, device: str) -> TorchModel:
    """``model`` with its module and every input tensor on ``device``."""
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
    calls: list[Call] = field(default_factory=list)
    last: Any = None  # the event of its last boundary


class CudaEvents:
    """A collector (see :mod:`layerperf.collectors.boundary`) of device time and allocator figures at
    module boundaries. Each boundary records an event from a pool on the pass's stream; at the pass's
    end the device is synchronized once, every pair read, and the events go back to the pool, so a
    boundary costs one ``cudaEventRecord`` (no event is created inside a timed pass after the first)."""

    def __init__(self, api: CudaApi | None = None, clock: Callable[[], int] = time.perf_counter_ns, *,
                 allocator: bool = True) -> None:
        self.api = api or CudaApi.real()
        self._clock = clock
        # the allocator's counters at every boundary too: torch.cuda.memory_allocated builds the whole
        # statistics dict (resnet18 ran 20x slower with them read at every boundary on an H100 host), so
        # timed runs record the events alone and the figures come from a pass of their own
        # (driver.allocator_pass)
        self.allocator = allocator
        self._open: list[_Open] = []
        self._pass: _Pass | None = None
        self._pool: list[Any] = []
        self._record: Callable[[Any], None] = _default_recorder()
        self._runs: list[Run] = []
        self._origin: int | None = None
        self._memory: dict[int, dict[str, int]] = {}

    def _event(self) -> Any:
        ev = self._pool.pop() if self._pool else self.api.event()
        self._record(ev)
        return ev

    def _fold_peak(self) -> None:
        """The allocator's peak since the last boundary into every open call; then a fresh peak."""
        peak = self.api.max_allocated()
        for frame in self._open:
            frame.peak = max(frame.peak, peak)
        self.api.reset_peak()

    def begin_pass(self) -> None:
        if self.allocator:
            self.api.reset_peak()
        self._open = []
        self._record = self.api.recorder()
        host = self._clock()
        self._pass = _Pass(host, self._event(), threading.get_native_id())
        if self._origin is None:
            self._origin = host

    def start(self, layer: int) -> None:
        if not self.allocator:
            self._open.append(_Open(layer, self._event(), 0, 0))
            return
        self._fold_peak()
        now = self.api.allocated()
        self._open.append(_Open(layer, self._event(), now, now))

    def stop(self, layer: int) -> None:
        end = self._event()
        if self.allocator:
            self._fold_peak()
        if not self._open or self._open[-1].layer != layer or self._pass is None:
            self._pool.append(end)
            return  # a boundary of a call that began outside the pass: nothing to pair it with
        frame = self._open.pop()
        after = self.api.allocated() if self.allocator else 0
        self._pass.calls.append(Call(layer, frame.start, end, frame.allocated, after, frame.peak))
        self._pass.last = end

    def end_pass(self) -> None:
        """The pass ends at its last boundary (a ``with`` block's run is ended only at the next model
        call: the time between steps is in no run); the device synchronized, every pair read, the
        events back in the pool."""
        p, self._pass = self._pass, None
        if p is None:
            return
        end = p.last if p.last is not None else self._event()
        self.api.synchronize()
        run_start = p.host_start_ns - (self._origin or 0)
        spans = [Span(c.layer, run_start + _ns(p.start, c.start), _ns(c.start, c.end), p.tid) for c in p.calls]
        self._runs.append(Run(run_start, _ns(p.start, end), sorted(spans, key=lambda s: s.start_ns)))
        for c in p.calls:
            self._pool += (c.start, c.end)
            if self.allocator:
                self._memory[c.layer] = {
                    "cuda_allocated_delta_bytes": c.allocated_end - c.allocated_start,
                    "cuda_peak_allocated_bytes": c.peak, "cuda_peak_rise_bytes": c.peak - c.allocated_start}
        self._pool += (p.start,) if end is p.last else (p.start, end)
        for frame in self._open:  # calls left open (a forward that raised): their start events
            self._pool.append(frame.start)
        self._open = []

    def runs(self) -> list[Run]:
        """Every pass as a Run: spans at their device offsets from the pass's start event; runs placed
        at their host start, from the first pass's."""
        return list(self._runs)

    def memory(self, n_layers: int) -> list[dict[str, int]]:
        """Per layer, the allocator's figures of its last call (the runs after warm-up agree; the
        first would not): bytes allocated across it, the peak while it ran, and the rise to it."""
        out: list[dict[str, int]] = [{} for _ in range(n_layers)]
        for layer, figures in self._memory.items():
            if layer < n_layers:
                out[layer] = dict(figures)
        return out


def _ns(start: Any, end: Any) -> int:
    return round(start.elapsed_time(end) * 1e6)  # ms -> ns


def fill_memory(layers: Sequence[Layer], events: CudaEvents) -> None:
    """The allocator's figures as each layer's extension (where it has some)."""
    for layer, figures in zip(layers, events.memory(len(layers)), strict=True):
        layer.extension = CudaModuleMemory.from_figures(figures) or layer.extension


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
    launched it (``module_of``: the op's module, see op_rows.kernel_ops)."""
    from torch.autograd import DeviceType

    by_id = {e.id: e for e in events if e.device_type == DeviceType.CPU}
    out = []
    for e in events:
        if e.device_type != DeviceType.CUDA or e.name.startswith(MARK) or getattr(e, "is_user_annotation", False):
            continue  # a range's copy on the GPU's timeline (gpu_user_annotation) is no kernel
        launcher = by_id.get(e.linked_correlation_id)
        module = module_of(launcher) if launcher is not None else None
        out.append(Kernel(module, e.name, e.time_range.start, e.time_range.end - e.time_range.start, int(e.thread)))
    return out
