"""Tensor descriptions shared by the backends, the cost model and the memory profiler."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from onnx import TensorProto, helper

Dim = int | str  # a symbolic dimension stays a string, e.g. "batch"


@dataclass(frozen=True, slots=True)
class TensorInfo:
    """Name, shape and element type of one tensor. ``shape`` is None when unknown."""

    name: str
    shape: tuple[Dim, ...] | None
    dtype: str  # numpy-style name: "float32", "int64", "bool", "float16", ...

    @property
    def itemsize(self) -> int:
        return dtype_itemsize(self.dtype)

    @property
    def is_static(self) -> bool:
        return self.shape is not None and all(isinstance(d, int) and d >= 0 for d in self.shape)

    @property
    def numel(self) -> int | None:
        """Number of elements, or None when the shape is not fully known."""
        if not self.is_static:
            return None
        assert self.shape is not None
        return math.prod(int(d) for d in self.shape)

    @property
    def nbytes(self) -> int | None:
        n = self.numel
        return None if n is None else n * self.itemsize

    def shape_str(self) -> str:
        if self.shape is None:
            return "?"
        return "x".join(str(d) for d in self.shape) if self.shape else "scalar"


_ITEMSIZE_OVERRIDES = {"bool": 1, "string": 0, "bfloat16": 2, "float8e4m3fn": 1, "float8e5m2": 1,
                       "int4": 1, "uint4": 1}


def dtype_itemsize(dtype: str) -> int:
    """Bytes per element for a numpy-style dtype name (sub-byte types round up to 1)."""
    if dtype in _ITEMSIZE_OVERRIDES:
        return _ITEMSIZE_OVERRIDES[dtype]
    try:
        return int(np.dtype(dtype).itemsize)
    except TypeError:
        return 0


def onnx_elem_to_dtype(elem_type: int) -> str:
    """ONNX TensorProto element type -> numpy-style name ("float32", "int64", ...)."""
    if elem_type == TensorProto.BFLOAT16:
        return "bfloat16"
    if elem_type == TensorProto.STRING:
        return "string"
    try:
        return str(np.dtype(helper.tensor_dtype_to_np_dtype(elem_type)))
    except (KeyError, TypeError, ValueError):
        return TensorProto.DataType.Name(elem_type).lower()


# ONNX Runtime's profiler names element types by their C++ names ("float", "int64_t", ...).
_ORT_TYPE_NAMES = {
    "float": "float32", "double": "float64", "float16": "float16", "MLFloat16": "float16",
    "bfloat16": "bfloat16", "BFloat16": "bfloat16", "int8_t": "int8", "uint8_t": "uint8",
    "int16_t": "int16", "uint16_t": "uint16", "int32_t": "int32", "uint32_t": "uint32",
    "int64_t": "int64", "uint64_t": "uint64", "bool": "bool", "string": "string",
}


def ort_type_to_dtype(name: str) -> str:
    return _ORT_TYPE_NAMES.get(name, name)
