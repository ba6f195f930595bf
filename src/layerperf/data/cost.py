"""The work of one op or layer as a value: FLOPs, integer operations, bytes read and written.

The cost model (:mod:`layerperf.cost`) computes it; a Layer gives its own as one (``Layer.cost``).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Cost:
    """FLOPs, integer operations and memory traffic of one node; any field is None when unknown.

    ``flops`` counts floating-point work only, ``int_ops`` integer work (quantized kernels, integer
    tensors); each is None for an op type the model does not cover or whose shapes are not static,
    never a silent 0 (0 means the op really does no such arithmetic, e.g. Reshape, or a float Conv's
    integer work). Both count the model's shapes; ``padded_flops`` is the FLOPs of the shapes as
    stored when a layout pads them (NCHWc channels), None when nothing is padded (then it is ``flops``).
    """

    flops: int | None
    bytes_read: int | None
    bytes_written: int | None
    int_ops: int | None = None
    padded_flops: int | None = None

    @property
    def bytes(self) -> int | None:
        """Bytes read plus bytes written, or None when either is unknown."""
        if self.bytes_read is None or self.bytes_written is None:
            return None
        return self.bytes_read + self.bytes_written

    @property
    def flops_as_stored(self) -> int | None:
        """FLOPs of the work on the stored (possibly padded) shapes: what the kernel really did."""
        return self.flops if self.padded_flops is None else self.padded_flops

    @property
    def intensity(self) -> float | None:
        """Arithmetic intensity in FLOPs per byte moved; None when either is unknown or no byte moved."""
        moved = self.bytes
        if self.flops is None or not moved or moved < 0:
            return None
        return float(self.flops) / float(moved)


UNKNOWN = Cost(None, None, None, None)
"""The cost of an op no model covers: nothing known, never a silent 0."""
