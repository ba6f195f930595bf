"""The raw per-layer records of a Profile: what ran (:class:`Layer`) and each execution of it (:class:`Span`)
within each measured run (:class:`Run`)."""

from __future__ import annotations

from dataclasses import dataclass, field

from layerperf.data.cost import Cost
from layerperf.data.extension import LayerExtension
from layerperf.data.tensor import TensorInfo

# The names ONNX's default operator domain goes by ("" where a backend names none).
ONNX_DOMAINS = frozenset(("", "ai.onnx", "onnx"))


def onnx_domain(domain: str | None) -> bool:
    """Whether ``domain`` is ONNX's default operator domain (None taken as "")."""
    return (domain or "") in ONNX_DOMAINS


@dataclass(slots=True)
class Layer:
    """One executed unit (an ONNX Runtime node after graph optimization, a torch module...), in execution
    order: its backend-neutral facts. What only its runtime reports is in ``extension``."""

    name: str
    op_type: str
    domain: str = ""
    provider: str = ""
    inputs: tuple[TensorInfo, ...] = ()
    outputs: tuple[TensorInfo, ...] = ()
    param_bytes: int = 0
    flops: int | None = None  # floating-point work; None: unknown op type or shapes, never a silent 0
    bytes_read: int | None = None
    bytes_written: int | None = None
    # label -> one count per measured pass (perf counters; filled by the counters feature)
    counters: dict[str, list[float]] = field(default_factory=dict)
    int_ops: int | None = None  # integer work (quantized kernels, integer tensors); None: unknown
    # FLOPs of the work on the stored shapes where a layout padded them (NCHWc channels); None when
    # nothing is padded, the work then being ``flops``
    padded_flops: int | None = None
    # the control-flow layer (Loop, If, Scan...) whose body this node is, by name; None at top level
    parent: str | None = None
    # the runtime's own figures of this layer (ONNX Runtime's arena, the CUDA allocator's), where it has some
    extension: LayerExtension | None = None

    @property
    def cost(self) -> Cost:
        """The layer's work as the cost model's record (FLOPs, int ops, bytes; None where unknown)."""
        return Cost(self.flops, self.bytes_read, self.bytes_written, self.int_ops, self.padded_flops)

    @property
    def bytes(self) -> int | None:
        return self.cost.bytes

    @property
    def in_shapes(self) -> str:
        """The input shapes as the runtime stored and ran them: ``1x24x16x16;24x32x3x3``."""
        return ";".join(t.shape_str() for t in self.inputs)

    @property
    def out_shapes(self) -> str:
        return ";".join(t.shape_str() for t in self.outputs)

    @property
    def in_dtypes(self) -> str:
        """The input element types: ``float32;float32``."""
        return ";".join(t.dtype for t in self.inputs)

    @property
    def out_dtypes(self) -> str:
        return ";".join(t.dtype for t in self.outputs)

    @property
    def real_in_shapes(self) -> str:
        """The model's input shapes: where a layout padded a tensor, its real dims (``1x20x16x16``)."""
        return ";".join(t.real_shape_str() for t in self.inputs)

    @property
    def real_out_shapes(self) -> str:
        return ";".join(t.real_shape_str() for t in self.outputs)

    @property
    def padded(self) -> bool:
        """Whether any of its tensors is stored padded (NCHWc channels)."""
        return any(t.padded for t in (*self.inputs, *self.outputs))

    @property
    def flops_as_stored(self) -> int | None:
        """FLOPs of the work on the stored shapes, padding included: ``padded_flops`` or ``flops``."""
        return self.cost.flops_as_stored

    @property
    def memory_figures(self) -> dict[str, int]:
        """The runtime's own memory figures of this layer under its names (empty where it has none)."""
        return self.extension.figures() if self.extension is not None else {}


@dataclass(frozen=True, slots=True)
class Span:
    """One execution of one layer: offsets are relative to the profile's time origin."""

    layer: int  # index into Profile.layers
    start_ns: int
    dur_ns: int
    tid: int


@dataclass(slots=True)
class Run:
    """One measured inference: its extent and the spans of the layers that ran in it."""

    start_ns: int
    dur_ns: int
    spans: list[Span] = field(default_factory=list)
