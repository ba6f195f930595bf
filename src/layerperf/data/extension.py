"""A backend's own figures of one layer, typed: what only its runtime reports, kept out of the
backend-neutral :class:`~layerperf.data.layer.Layer`.

Each kind is a frozen dataclass whose fields are the runtime's own names; trace.json keeps them in the
layer's ``memory`` object under those names, as layerperf 0.1 wrote them. A new backend adds its kind
here and to :data:`KINDS`, which loading tries in order.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

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


KINDS: tuple[type[LayerExtension], ...] = (OrtNodeMemory, CudaModuleMemory)


def from_figures(figures: Mapping[str, Any]) -> LayerExtension | None:
    """The kind a layer's saved figures are (the first of :data:`KINDS` they name); None for none."""
    for kind in KINDS:
        if (found := kind.from_figures(figures)) is not None:
            return found
    return None
