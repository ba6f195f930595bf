"""Text forms of the bench options: ``NAME=DIMS[:dtype]``, ``KEY=VALUE``, ``NAME=DIMS1,DIMS2``.

Each parser raises InputError naming the flag and the expected form, so the CLI and the Python API
(which accepts the same strings) report mistakes the same way.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence

import numpy as np

from layerperf.errors import InputError

# numpy-style names layerperf generates data for, with the ONNX spellings users also type.
DTYPES = ("float32", "float16", "float64", "int8", "uint8", "int16", "uint16", "int32", "uint32", "int64",
          "uint64", "bool")
_ALIASES = {"float": "float32", "half": "float16", "double": "float64", "fp32": "float32", "fp16": "float16",
            "fp64": "float64", "long": "int64", "int": "int32"}
_DIMS_RE = re.compile(r"^\d+(?:x\d+)*$")

Dims = tuple[int, ...]


def parse_dtype(text: str, what: str = "dtype") -> str:
    """A dtype name ("float32", "fp16", "int64"...) -> its numpy-style name."""
    name = _ALIASES.get(text.strip().lower(), text.strip().lower())
    if name not in DTYPES:
        raise InputError(f"unknown {what} '{text}'", hint="one of: " + ", ".join(DTYPES))
    return name


def parse_dims(text: str, what: str = "dims") -> Dims:
    """``1x3x224x224`` -> (1, 3, 224, 224); ``scalar`` -> (). Every dimension must be positive."""
    text = text.strip().lower()
    if text in {"scalar", "()"}:
        return ()
    if not _DIMS_RE.match(text):
        raise InputError(f"malformed {what} '{text}'",
                         hint="expected positive integers joined by x, such as 1x3x224x224 (or 'scalar')")
    dims = tuple(int(d) for d in text.split("x"))
    if 0 in dims:
        raise InputError(f"{what} '{text}' has a zero dimension: there would be nothing to measure")
    return dims


def split_pair(item: str, flag: str, form: str) -> tuple[str, str]:
    name, sep, value = item.partition("=")
    if not sep or not name.strip() or not value.strip():
        raise InputError(f"malformed {flag} '{item}'", hint=f"expected {form}")
    return name.strip(), value.strip()


def split_dtype(value: str) -> tuple[str, str | None]:
    """``1x3x8x8:float16`` -> ("1x3x8x8", "float16"); no suffix -> (value, None)."""
    head, sep, tail = value.rpartition(":")
    return (head, parse_dtype(tail)) if sep else (value, None)


def parse_input(item: str) -> tuple[str, Dims, str | None]:
    """``--input NAME=DIMS[:dtype]`` -> (name, dims, dtype or None for the op's default)."""
    name, value = split_pair(item, "--input", "NAME=DIMS[:dtype], such as X=1x3x224x224 or X=1x16:float16")
    dims_text, dtype = split_dtype(value)
    return name, parse_dims(dims_text, f"dims of input {name}"), dtype


def parse_const(item: str) -> tuple[str, np.ndarray, str | None]:
    """``--const NAME=VALUES[:dtype]``: VALUES is JSON, ``[1,-1]`` a 1-D tensor, ``0.5`` a scalar."""
    name, value = split_pair(item, "--const", "NAME=VALUES[:dtype], such as shape=[1,-1]:int64 or min=0.0")
    text, dtype = split_dtype(value)
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        raise InputError(f"--const {name}: '{text}' is not a number or a JSON list",
                         hint="such as 3, 0.5, [1,-1] or [[1,2],[3,4]]") from None
    try:
        arr = np.asarray(data)
    except ValueError:
        raise InputError(f"--const {name}: '{text}' is a ragged list") from None
    if arr.dtype.kind not in "biuf":
        raise InputError(f"--const {name}: '{text}' holds non-numbers")
    return name, arr, dtype


def parse_attr_item(item: str) -> tuple[str, str]:
    """``--attr KEY=VALUE`` -> (key, raw text); the op schema decides the value's type later."""
    return split_pair(item, "--attr", "KEY=VALUE, such as pads=1,1,1,1 or auto_pad=SAME_UPPER")


def guess_attr(text: str) -> object:
    """A value for an attribute the schema does not type: int, float, list of them, else string."""
    parts = [p.strip() for p in text.split(",")]
    values = [_number(p) for p in parts]
    if all(v is not None for v in values):
        if len(values) == 1 and "," not in text:
            return values[0]
        return [float(v) for v in values] if any(isinstance(v, float) for v in values) else values  # type: ignore[arg-type]
    return parts if len(parts) > 1 else text


def _number(text: str) -> int | float | None:
    try:
        return int(text)
    except ValueError:
        pass
    try:
        return float(text)
    except ValueError:
        return None


def parse_sweep(item: str) -> tuple[str, list[Dims]]:
    """``--sweep NAME=DIMS1,DIMS2,...`` -> (name, [dims, ...]); a dtype suffix is not allowed here."""
    name, value = split_pair(item, "--sweep", "NAME=DIMS1,DIMS2,..., such as X=1x64x28x28,1x64x56x56")
    return name, [parse_dims(d, f"--sweep {name} dims") for d in value.split(",")]


def parse_threads(text: str | int | Sequence[int]) -> list[int]:
    """``"1,2"`` or 2 or [1, 2] -> [1, 2]; 0 keeps ONNX Runtime's default thread count."""
    if isinstance(text, int):
        items: list[object] = [text]
    elif isinstance(text, str):
        items = [t.strip() for t in text.split(",")]
    else:
        items = list(text)
    out = []
    for t in items:
        try:
            n = int(t)  # type: ignore[call-overload]
        except (TypeError, ValueError):
            raise InputError(f"--threads: '{t}' is not an integer", hint="such as 1 or 1,2,4") from None
        if n < 0:
            raise InputError(f"--threads: {n} is negative", hint="0 keeps ONNX Runtime's default")
        out.append(n)
    if not out:
        raise InputError("--threads is empty")
    return out


def parse_duration_ms(text: str) -> float:
    """``1``, ``1ms``, ``500us``, ``0.01s`` -> milliseconds (a bare number is milliseconds)."""
    t = text.strip().lower()
    scale = 1.0
    for suffix, factor in (("ms", 1.0), ("us", 1e-3), ("µs", 1e-3), ("s", 1e3)):
        if t.endswith(suffix):
            t, scale = t[: -len(suffix)], factor
            break
    value = _number(t)
    if value is None or not 0 < value < math.inf:
        raise InputError(f"--min-time: '{text}' is not a positive duration", hint="such as 1ms, 500us or 0.01s")
    return float(value) * scale
