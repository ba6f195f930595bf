"""Tensor descriptions shared by the backends, the cost model and the memory profiler."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

Dim = int | str  # a symbolic dimension stays a string, e.g. "batch"


@dataclass(frozen=True, slots=True)
class TensorInfo:
    """Name, shape and element type of one tensor. ``shape`` is None when unknown.

    ``shape`` is the tensor as stored and run. ``real_shape`` is set only where a layout pads the
    tensor (ONNX Runtime's NCHWc rounds channels up to its block): the model's own shape, which the
    cost model counts work on (see :mod:`layerperf.cost.onnx.layout`).
    """

    name: str
    shape: tuple[Dim, ...] | None
    dtype: str  # numpy-style name: "float32", "int64", "bool", "float16", ...
    real_shape: tuple[Dim, ...] | None = None

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

    @property
    def padded(self) -> bool:
        """Whether the stored shape pads the model's (``real_shape`` differs from ``shape``)."""
        return self.real_shape is not None and self.real_shape != self.shape

    def logical(self) -> TensorInfo:
        """This tensor with the model's shape: ``real_shape`` where padded, else itself."""
        return TensorInfo(self.name, self.real_shape, self.dtype) if self.padded else self

    def shape_str(self) -> str:
        """The stored dims, ``1x24x16x16`` (``scalar``, ``?`` unknown)."""
        if self.shape is None:
            return "?"
        return "x".join(str(d) for d in self.shape) if self.shape else "scalar"

    def real_shape_str(self) -> str:
        """The model's dims: ``real_shape`` where padded, else the stored ones."""
        return self.logical().shape_str()

    def marked_shape_str(self) -> str:
        """The stored dims with each padded one followed by the model's in brackets: ``1x24(20)x16x16``."""
        if not self.padded or self.shape is None or self.real_shape is None or len(self.real_shape) != len(self.shape):
            return self.shape_str()
        return "x".join(str(d) if d == r else f"{d}({r})" for d, r in zip(self.shape, self.real_shape, strict=True))


def is_float_dtype(dtype: str) -> bool:
    """Whether a numpy-style dtype name is a floating-point type (float8/16/32/64, bfloat16)."""
    return dtype.startswith("float") or dtype == "bfloat16"


def is_integer_dtype(dtype: str) -> bool:
    """Whether a dtype name is an integer or boolean type (int4...uint64, bool)."""
    return dtype == "bool" or dtype.startswith(("int", "uint"))


# Element types numpy lacks, by the names ml_dtypes gives them (onnx's own mapping of these differs
# across onnx releases: older ones map them to their storage types, uint8 or uint16).
_ML_NAMES = {"BFLOAT16": "bfloat16", "FLOAT8E4M3FN": "float8_e4m3fn", "FLOAT8E4M3FNUZ": "float8_e4m3fnuz",
             "FLOAT8E5M2": "float8_e5m2", "FLOAT8E5M2FNUZ": "float8_e5m2fnuz", "FLOAT8E8M0": "float8_e8m0fnu",
             "UINT4": "uint4", "INT4": "int4", "FLOAT4E2M1": "float4_e2m1fn", "UINT2": "uint2", "INT2": "int2"}
ML_DTYPES = frozenset(_ML_NAMES.values())
# PyTorch's element types numpy and ml_dtypes lack: quantized, bit-packed and sub-byte integers (a tensor's
# element_size, sub-byte ones rounded up to 1)
_TORCH_ITEMSIZES = {"complex32": 4, "qint8": 1, "quint8": 1, "qint32": 4, "quint4x2": 1, "quint2x4": 1,
                    "float4_e2m1fn_x2": 1, "bits8": 1, "bits16": 2, "bits1x8": 1, "bits2x4": 1, "bits4x2": 1,
                    **{f"{sign}int{n}": 1 for sign in ("", "u") for n in (1, 3, 5, 6, 7)}}
_ITEMSIZE_OVERRIDES = {"bool": 1, "string": 0, **{name: 2 if name == "bfloat16" else 1 for name in ML_DTYPES},
                       **_TORCH_ITEMSIZES}


def numpy_dtype(dtype: str) -> np.dtype | None:
    """The numpy dtype of a numpy-style name, or None ("string", or a name numpy does not know).

    Element types numpy lacks (bfloat16, the float8 types, int4, uint4...) are ml_dtypes' types,
    None where ml_dtypes is not installed: layerperf then cannot make nor read such tensors.
    """
    if dtype == "string":
        return None
    try:
        return np.dtype(dtype)
    except TypeError:
        pass
    if dtype not in ML_DTYPES:
        return None
    try:
        import ml_dtypes
    except ImportError:
        return None
    return np.dtype(getattr(ml_dtypes, dtype))


def lacks_numpy(dtype: np.dtype) -> bool:
    """Whether ``dtype`` is one numpy lacks (an ml_dtypes type): ONNX Runtime and .npz files take its raw bits."""
    return dtype.isbuiltin == 2


def dtype_itemsize(dtype: str) -> int:
    """Bytes per element for a numpy-style dtype name (sub-byte types round up to 1)."""
    if dtype in _ITEMSIZE_OVERRIDES:
        return _ITEMSIZE_OVERRIDES[dtype]
    np_dtype = numpy_dtype(dtype)
    return 0 if np_dtype is None else int(np_dtype.itemsize)


def onnx_elem_to_dtype(elem_type: int) -> str:
    """ONNX TensorProto element type -> numpy-style name ("float32", "int64", "bfloat16", "float8_e4m3fn"...)."""
    from onnx import TensorProto, helper  # onnx takes a quarter of a second to import: only ONNX's numbers need it

    if elem_type in TensorProto.DataType.values() and TensorProto.DataType.Name(elem_type) in _ML_NAMES:
        return _ML_NAMES[TensorProto.DataType.Name(elem_type)]
    if elem_type == TensorProto.STRING:
        return "string"
    try:
        return str(np.dtype(helper.tensor_dtype_to_np_dtype(elem_type)))
    except (KeyError, TypeError, ValueError):
        return TensorProto.DataType.Name(elem_type).lower()


def onnx_type_name_to_dtype(name: str) -> str:
    """An ONNX type name as ONNX Runtime writes it inside 'tensor(...)' ("float", "float8e4m3fn", "int4")
    -> numpy-style name; a name ONNX does not know is returned as it is."""
    from onnx import TensorProto

    try:
        return onnx_elem_to_dtype(TensorProto.DataType.Value(name.upper()))
    except ValueError:
        return name


# ONNX Runtime's profiler names element types by their C++ names ("float", "int64_t", ...).
_ORT_TYPE_NAMES = {
    "float": "float32", "double": "float64", "float16": "float16", "MLFloat16": "float16",
    "bfloat16": "bfloat16", "BFloat16": "bfloat16", "int8_t": "int8", "uint8_t": "uint8",
    "int16_t": "int16", "uint16_t": "uint16", "int32_t": "int32", "uint32_t": "uint32",
    "int64_t": "int64", "uint64_t": "uint64", "bool": "bool", "string": "string",
    "Float8E4M3FN": "float8_e4m3fn", "Float8E4M3FNUZ": "float8_e4m3fnuz", "Float8E5M2": "float8_e5m2",
    "Float8E5M2FNUZ": "float8_e5m2fnuz", "Int4x2": "int4", "UInt4x2": "uint4",
}


def ort_type_to_dtype(name: str) -> str:
    return _ORT_TYPE_NAMES.get(name, name)
