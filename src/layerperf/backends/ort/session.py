"""layerperf's own ONNX Runtime sessions: the one place where ONNX Runtime's failures become layerperf errors.

Every session layerperf loads and runs itself (profiled runs, latency, feed preparation, memory, bench,
the stepwise executor and its counting worker) is a :class:`Session`. ONNX Runtime's exceptions while
it loads or runs (its own pybind types, and RuntimeError for what its bindings cannot convert) become
one BackendError line that names the model and carries ONNX Runtime's own message: exit code 2.

A Session also takes and gives the element types numpy lacks (bfloat16, the float8 types, 4- and
2-bit integers; ml_dtypes arrays in layerperf). ONNX Runtime's Python binding converts none of them,
so they cross as OrtValues holding their raw bits, 4- and 2-bit values packed as ONNX Runtime stores
them.
"""

from __future__ import annotations

import ctypes
import os
import re
from typing import Any

import numpy as np
import onnxruntime as ort
import onnxruntime.capi.onnxruntime_pybind11_state as _pybind
from onnx import TensorProto

from layerperf.data.tensor import lacks_numpy, numpy_dtype, onnx_type_name_to_dtype
from layerperf.errors import BackendError

ORT_ERRORS: tuple[type[Exception], ...] = (RuntimeError, *(
    c for c in vars(_pybind).values() if isinstance(c, type) and issubclass(c, Exception)))
"""What ONNX Runtime raises: its status types (Fail, InvalidArgument...), RuntimeError from its bindings."""

# Values per byte where ONNX Runtime packs sub-byte types; ml_dtypes keeps one value per byte.
_PACKED = {"int4": 2, "uint4": 2, "float4_e2m1fn": 2, "int2": 4, "uint2": 4}
_STATUS = re.compile(r"\[ONNXRuntimeError\] : \d+ : \w+ : ")
# Where in ONNX Runtime's C++ a message was made, in its two forms (its CodeLocation): an exception's (a failed
# ORT_ENFORCE, ORT_THROW) has the file's whole path and the function's whole signature, "/src/.../x.cc:52
# <signature> ..."; a returned status's (ORT_RETURN_IF...) has the file's name and the function's bare name,
# "upsamplebase.h:548 ScalesValidation ...". A message may hold both, one status wrapped in another.
_SOURCE = re.compile(r"(?:^|(?<=\s))(?P<path>\S*/)?[\w.+-]+\.(?:cc|cpp|cxx|cu|c|h|hpp|cuh|inc):\d+ ")
_TEMPLATE = re.compile(r"^\[with [^\]]*\]\s*")
_TENSOR = re.compile(r"tensor\((\w+)\)")


def ort_message(exc: BaseException) -> str:
    """ONNX Runtime's message in one line, without its status prefixes nor where in its C++ it was made (the
    file and line, the function's signature or name); a failed check's condition and reason are kept."""
    text = " ".join(str(exc).split()) or type(exc).__name__
    text = _STATUS.sub("", text)
    start = 0
    while where := _SOURCE.search(text, start):
        rest = text[where.end():]
        # "<signature> <the check> was false. <why>": keep the check and why; "<name> <why>": keep why
        rest = _after_signature(rest) if where.group("path") else rest.partition(" ")[2]
        text = text[:where.start()] + rest
        start = where.start()
    return text


def _after_signature(text: str) -> str:
    depth = 0
    for i, ch in enumerate(text):
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
            end = i + 1
            while text.startswith(">", end):  # the end of "::<lambda()>"
                end += 1
            if depth == 0 and not text.startswith("::", end):
                return _TEMPLATE.sub("", text[end:].lstrip().removeprefix("const ").lstrip())
    return text


def elem_type(type_str: str) -> int:
    """'tensor(float)' (ONNX Runtime's name of a tensor type) -> ONNX element type."""
    inner = _TENSOR.fullmatch(type_str)
    if inner is None:
        raise BackendError(f"ONNX Runtime passes a {type_str} where layerperf handles tensors only")
    return int(TensorProto.DataType.Value(inner.group(1).upper()))


def _lacks(type_str: str) -> bool:
    """Whether an ONNX Runtime type ('tensor(bfloat16)', 'seq(tensor(int4))') holds an element type numpy lacks."""
    dtypes = (numpy_dtype(onnx_type_name_to_dtype(name)) for name in _TENSOR.findall(type_str))
    return any(d is not None and lacks_numpy(d) for d in dtypes)


def _raw_bits(arr: np.ndarray) -> np.ndarray:
    """The bytes ONNX Runtime stores for ``arr`` (sub-byte values packed, the first in the low bits)."""
    raw = np.ascontiguousarray(arr).view(np.uint8).ravel()
    per_byte = _PACKED.get(arr.dtype.name, 1)
    if per_byte == 1:
        return raw
    width = 8 // per_byte
    values = np.concatenate([raw & ((1 << width) - 1), np.zeros(-raw.size % per_byte, np.uint8)])
    shifted = values.reshape(-1, per_byte) << (np.arange(per_byte, dtype=np.uint8) * width)
    return np.bitwise_or.reduce(shifted, axis=1).astype(np.uint8)


def _ml_elem_type(dtype: np.dtype) -> int:
    # ml_dtypes' names; not onnx's own mapping, which older onnx releases lack for these types
    name = {"float8_e8m0fnu": "FLOAT8E8M0", "float4_e2m1fn": "FLOAT4E2M1"}.get(dtype.name, dtype.name)
    try:
        return int(TensorProto.DataType.Value(name.replace("_", "").upper()))
    except ValueError:
        raise BackendError(f"this onnx release has no element type for {dtype.name}") from None


def to_ortvalue(arr: np.ndarray) -> ort.OrtValue:
    """An OrtValue holding ``arr``, element types numpy lacks included."""
    try:
        if not lacks_numpy(arr.dtype):
            return ort.OrtValue.ortvalue_from_numpy(arr)
        value = ort.OrtValue.ortvalue_from_shape_and_type(list(arr.shape), _ml_elem_type(arr.dtype))
    except ORT_ERRORS as exc:
        raise BackendError(f"ONNX Runtime cannot hold a {arr.dtype} array as a tensor: {ort_message(exc)}") from None
    raw = _raw_bits(arr)
    if raw.nbytes != value.tensor_size_in_bytes():
        raise BackendError(f"ONNX Runtime stores {value.tensor_size_in_bytes()} bytes for a {arr.dtype} tensor "
                           f"of shape {arr.shape}, not the {raw.nbytes} layerperf packed")
    if raw.nbytes:
        ctypes.memmove(value.data_ptr(), raw.ctypes.data, raw.nbytes)
    return value


def from_ortvalue(value: ort.OrtValue) -> Any:
    """The numpy array an OrtValue tensor holds (an ml_dtypes array where numpy lacks the type)."""
    if not value.is_tensor() or not _lacks(value.data_type()):
        return value.numpy()
    dtype = numpy_dtype(onnx_type_name_to_dtype(value.data_type()[len("tensor("):-1]))
    assert dtype is not None
    shape = tuple(value.shape())
    raw = np.frombuffer(ctypes.string_at(value.data_ptr(), value.tensor_size_in_bytes()), np.uint8)
    per_byte = _PACKED.get(dtype.name, 1)
    if per_byte > 1:
        width = 8 // per_byte
        unpacked = (raw[:, None] >> (np.arange(per_byte, dtype=np.uint8) * width)) & ((1 << width) - 1)
        raw = unpacked.ravel()[:int(np.prod(shape))].astype(np.uint8)
    return raw.view(dtype).reshape(shape)


def quiet_run_options() -> ort.RunOptions:
    """Run options under which ONNX Runtime logs nothing: a failure is reported once, as the error raised."""
    options = ort.RunOptions()
    options.log_severity_level = 4
    return options


class Session(ort.InferenceSession):
    """An InferenceSession whose failures are one-line BackendErrors naming ``what`` it runs."""

    def __init__(self, model: str | os.PathLike[str] | bytes, so: ort.SessionOptions, provider: str, *,
                 what: str) -> None:
        self.what = what
        self._feed_given: dict[str, Any] | None = None
        self._feed_ort: dict[str, Any] = {}
        # ONNX Runtime logs a failure to load before raising it: the error raised says it once, in one line
        so.log_severity_level = max(so.log_severity_level, 4)
        try:
            super().__init__(model if isinstance(model, bytes) else os.fspath(model), so, providers=[provider])
        except ORT_ERRORS as exc:
            raise BackendError(f"ONNX Runtime cannot load {what}: {ort_message(exc)}") from None
        self._bits_out = any(_lacks(o.type) for o in self.get_outputs())
        self.quiet = quiet_run_options()
        self._run = super().run

    def failure(self, exc: BaseException) -> BackendError:
        """The error for ONNX Runtime's exception ``exc`` raised while running this session."""
        return BackendError(f"ONNX Runtime cannot run {self.what}: {ort_message(exc)}")

    def _ort_feed(self, feed: dict[str, Any]) -> dict[str, Any]:
        self._feed_ort = {k: to_ortvalue(v) if isinstance(v, np.ndarray) and lacks_numpy(v.dtype) else v
                          for k, v in feed.items()}
        self._feed_given = feed
        return self._feed_ort

    def run(self, output_names: Any, input_feed: dict[str, Any], run_options: Any = None) -> Any:
        try:
            # timed loops pass the same dict every run: it is converted once
            feed = self._feed_ort if input_feed is self._feed_given else self._ort_feed(input_feed)
            if not self._bits_out:
                return self._run(output_names, feed, run_options or self.quiet)
            # numpy cannot take these outputs: take OrtValues and read their bits
            names = list(output_names or [o.name for o in self.get_outputs()])
            values = {k: v if isinstance(v, ort.OrtValue) else ort.OrtValue.ortvalue_from_numpy(np.asarray(v))
                      for k, v in feed.items()}
            return [from_ortvalue(v) for v in super().run_with_ort_values(names, values, run_options or self.quiet)]
        except ORT_ERRORS as exc:
            raise self.failure(exc) from None

    def run_with_ort_values(self, output_names: Any, input_dict_ort_values: Any, run_options: Any = None) -> Any:
        try:
            return super().run_with_ort_values(output_names, input_dict_ort_values, run_options or self.quiet)
        except ORT_ERRORS as exc:
            raise self.failure(exc) from None

    def run_with_iobinding(self, iobinding: Any, run_options: Any = None) -> None:
        try:
            super().run_with_iobinding(iobinding, run_options or self.quiet)
        except ORT_ERRORS as exc:
            raise self.failure(exc) from None
