"""The aten namespace on a call a PyTorch profiler trace recorded (``record_shapes=True``).

A trace gives each op's ``Input Dims``, ``Input type`` and, for scalar arguments, ``Concrete Inputs`` (a
convolution's stride, padding, dilation and groups), position by position — not its results. torch 2.x
writes no ``flops`` argument at all, even with ``with_flops=True``, so the work of the ops whose results
follow from these (:data:`layerperf.cost.aten.RESULTS`: convolutions, ``linear``, the matrix products,
``cat`` and ``stack``) is derived here with the aten table, and the bytes they read and write from the
tensors' dims and element types. A list of tensors (``TensorList``) is recorded as the list of its
tensors' dims, with no element type of its own: its tensors take the call's first known one, and where
the call has none (``cat``'s only tensors are in its list) their bytes are unknown. No torch needed.
"""

from __future__ import annotations

import functools
import json
from typing import Any

from layerperf.cost import aten
from layerperf.cost.aten.call import AtenCall
from layerperf.data.cost import UNKNOWN, Cost
from layerperf.data.tensor import TensorInfo

PREFIX = "aten::"
# PyTorch's names of element types in "Input type", as numpy-style names
DTYPES = {"float": "float32", "double": "float64", "c10::Half": "float16", "c10::BFloat16": "bfloat16",
          "long int": "int64", "int": "int32", "short int": "int16", "signed char": "int8",
          "unsigned char": "uint8", "bool": "bool"}
TENSOR_LIST = "TensorList"


def costed(name: str) -> bool:
    """Whether a recorded call of the op named ``name`` (``aten::conv2d``) can be costed at all."""
    return name.startswith(PREFIX) and aten.infers_results(name[len(PREFIX):])


@functools.lru_cache(maxsize=4096)
def cost(name: str, input_dims: bytes, input_types: bytes, concrete: bytes) -> Cost:
    """The cost of one recorded call of ``name`` (``aten::conv2d``) from its ``Input Dims``, ``Input type``
    and ``Concrete Inputs`` (raw JSON; ``b""`` when absent); unknown where they do not tell."""
    if not costed(name):
        return UNKNOWN
    try:
        args = arguments(json.loads(input_dims), json.loads(input_types) if input_types else [],
                         json.loads(concrete) if concrete else [])
    except (ValueError, TypeError):
        return UNKNOWN
    return aten.cost(AtenCall(name[len(PREFIX):], args))


def arguments(dims: list[Any], types: list[Any], concrete: list[Any]) -> tuple[Any, ...]:
    """The positional arguments: a tensor (dims and a known element type, or an empty shape of a known
    type) as a TensorInfo, a list of tensors as a tuple of them, a scalar as its value, None where nothing
    was recorded. A tensor whose own element type is not known takes the first known one of the call."""
    types = [str(t) for t in types]
    fallback = next((DTYPES[t] for t in types if t in DTYPES), "unknown")
    out: list[Any] = []
    for i in range(max(len(dims), len(concrete))):
        shape = dims[i] if i < len(dims) else []
        kind = types[i] if i < len(types) else ""
        if kind == TENSOR_LIST and isinstance(shape, list):
            out.append(tuple(_tensor(f"in{i}.{k}", s, fallback) for k, s in enumerate(shape)))
        elif (isinstance(shape, list) and shape) or kind in DTYPES:
            out.append(_tensor(f"in{i}", shape, DTYPES.get(kind, fallback)))
        else:
            out.append(_scalar(str(concrete[i]) if i < len(concrete) else ""))
    return tuple(out)


def _tensor(name: str, shape: Any, dtype: str) -> TensorInfo:
    return TensorInfo(name, tuple(int(d) for d in shape), dtype)


def _scalar(text: str) -> Any:
    """A concrete input as its value: ``[1, 1]`` a list, ``1`` an int, ``False`` a bool; "" is None."""
    if not text:
        return None
    for candidate in (text, text.lower()):
        try:
            return json.loads(candidate)
        except ValueError:
            continue
    return text
