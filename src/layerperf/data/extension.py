"""A backend's own figures of one layer, typed: what only its runtime reports, kept out of the
backend-neutral :class:`~layerperf.data.layer.Layer`.

Each kind is a frozen dataclass whose fields are the runtime's own names. The memory kinds' figures
(ints) are kept in the layer's ``memory`` object under those names, as layerperf 0.1 wrote them: a new
memory kind goes here and into :data:`KINDS`, which loading tries in order. A kind that is no set of
figures (TVM's kernel: its function, nodes and schedule) has a key of its own in the layer's object
(:data:`OWN_KEYS`), written by its ``to_json`` and read by its ``from_json``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, TypeVar

from layerperf.data.schedule import KernelSchedule

_E = TypeVar("_E", bound="LayerExtension")


@dataclass(frozen=True, slots=True)
class LayerExtension:
    """The base of every kind: its figures by name, and the kind read back from them."""

    def figures(self) -> dict[str, int]:
        """The figures under the runtime's names, those it reported."""
        return {f.name: v for f in dataclasses.fields(self) if (v := getattr(self, f.name)) is not None}

    @classmethod
    def from_figures(cls: type[_E], figures: Mapping[str, Any]) -> _E | None:
        """The kind from figures under its names; None when they hold none of them."""
        names = [f.name for f in dataclasses.fields(cls)]
        if not any(k in figures for k in names):
            return None
        return cls(**{k: int(figures[k]) for k in names if figures.get(k) is not None})


@dataclass(frozen=True, slots=True)
class OrtNodeMemory(LayerExtension):
    """ONNX Runtime's memory figures of one node, from its profiler event (bytes, the last measured run):
    the sizes its plan gives the node's activations, weights and outputs, and the arena's state after it."""

    activation_size: int | None = None
    parameter_size: int | None = None
    output_size: int | None = None
    mem_bytes_requested_in_use: int | None = None
    mem_bytes_in_use: int | None = None
    mem_in_use_peak: int | None = None
    mem_arena_held: int | None = None
    mem_requested_in_use_delta: int | None = None
    mem_in_use_delta: int | None = None
    mem_arena_held_delta: int | None = None


@dataclass(frozen=True, slots=True)
class CudaModuleMemory(LayerExtension):
    """PyTorch's CUDA caching allocator across one module's last call (bytes): allocated at its end less
    at its start, the peak while it ran, and the rise of that peak above its start."""

    cuda_allocated_delta_bytes: int | None = None
    cuda_peak_allocated_bytes: int | None = None
    cuda_peak_rise_bytes: int | None = None


@dataclass(frozen=True, slots=True)
class TvmKernel(LayerExtension):
    """One call of TVM's Relax VM: the compiled function it runs (a kernel, ``fused_conv2d_add_relu``,
    or a VM builtin, ``vm.builtin.alloc_storage``), the ONNX nodes it computes in graph order (a fused
    kernel lists all it covers; ``anchor`` is the one it is named after), its place among ``main``'s
    calls, and the schedule the kernel was built with (None for a builtin)."""

    KEY: ClassVar[str] = "tvm"

    function: str
    nodes: tuple[str, ...] = ()
    anchor: str | None = None
    call: int | None = None
    schedule: KernelSchedule | None = None

    def figures(self) -> dict[str, int]:
        return {}  # no memory figures: its facts are under its own key

    def to_json(self) -> dict[str, Any]:
        return {"function": self.function, "nodes": list(self.nodes), "anchor": self.anchor, "call": self.call,
                "schedule": None if self.schedule is None else self.schedule.to_json()}

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> TvmKernel:
        schedule = d.get("schedule")
        return cls(str(d.get("function", "")), tuple(str(n) for n in d.get("nodes") or ()),
                   None if d.get("anchor") is None else str(d["anchor"]),
                   None if d.get("call") is None else int(d["call"]),
                   None if schedule is None else KernelSchedule.from_json(schedule))


KINDS: tuple[type[LayerExtension], ...] = (OrtNodeMemory, CudaModuleMemory)
# kinds kept under a key of their own in a layer's JSON object, by that key
OWN_KEYS: dict[str, type[TvmKernel]] = {TvmKernel.KEY: TvmKernel}


def from_figures(figures: Mapping[str, Any]) -> LayerExtension | None:
    """The kind a layer's saved figures are (the first of :data:`KINDS` they name); None for none."""
    for kind in KINDS:
        if (found := kind.from_figures(figures)) is not None:
            return found
    return None


def to_layer_json(ext: LayerExtension | None) -> dict[str, Any]:
    """The keys a layer's JSON object gets for ``ext`` besides ``memory`` (a kind with a key of its own)."""
    if isinstance(ext, TvmKernel):
        return {ext.KEY: ext.to_json()}
    return {}


def from_layer_json(d: Mapping[str, Any]) -> LayerExtension | None:
    """The kind a saved layer object holds: under a kind's own key, else in its ``memory`` figures."""
    for key, kind in OWN_KEYS.items():
        if isinstance(d.get(key), Mapping):
            return kind.from_json(d[key])
    return from_figures(d.get("memory") or {})
