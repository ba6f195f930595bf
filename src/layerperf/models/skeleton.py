"""A model's graph without its weights, read from the file without reading the weights.

Profiling needs the graph (nodes, inputs, initializer names, shapes and types), never the weight
values: ONNX Runtime reads those itself from the file. Parsing the whole file would hold the
model twice while parsing (the file's bytes and the parsed message) and once more for as long as
the profile runs. Here the protobuf wire format is walked with seeks: every field is copied as it
is, except the ``raw_data`` of a graph initializer larger than ``inline_limit`` bytes, which is
skipped and recorded as ONNX external data pointing back into the file itself (its name, the
offset and length of those bytes). The result is a valid model: ``onnx.load_external_data_for_model
(skeleton, str(path.parent))`` reads the weights back. Small initializers (shape constants) stay
inline, so shape inference and constant folding over the skeleton see their values.
"""

from __future__ import annotations

import io
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

import onnx

INLINE_LIMIT_BYTES = 64 * 1024

# Field numbers of onnx.proto (stable parts of the format).
_MODEL_GRAPH = 7
_GRAPH_INITIALIZER = 5
_TENSOR_RAW_DATA = 9
_VARINT, _I64, _LEN, _I32 = 0, 1, 2, 5


class WireError(ValueError):
    """The file is not well-formed protobuf where the walker looked."""


def _varint(f: BinaryIO) -> int:
    shift = value = 0
    while True:
        b = f.read(1)
        if not b:
            raise WireError("truncated varint")
        value |= (b[0] & 0x7F) << shift
        if not b[0] & 0x80:
            return value
        shift += 7
        if shift > 63:
            raise WireError("varint too long")


def _encode_varint(value: int) -> bytes:
    out = bytearray()
    while True:
        low, value = value & 0x7F, value >> 7
        out.append(low | (0x80 if value else 0))
        if not value:
            return bytes(out)


def _fields(f: BinaryIO, end: int) -> list[tuple[int, int, int, int, int]]:
    """(field number, wire type, start, payload start, end) of each field from here to ``end``.

    The payload is what a length-delimited field holds, after its key and length.
    """
    out = []
    while f.tell() < end:
        start = f.tell()
        key = _varint(f)
        number, wire = key >> 3, key & 7
        payload = f.tell()
        if wire == _VARINT:
            _varint(f)
        elif wire in (_I64, _I32):
            f.seek(8 if wire == _I64 else 4, io.SEEK_CUR)
        elif wire == _LEN:
            length = _varint(f)
            payload = f.tell()
            f.seek(length, io.SEEK_CUR)
        else:
            raise WireError(f"unsupported wire type {wire}")
        if f.tell() > end:
            raise WireError("field runs past its message")
        out.append((number, wire, start, payload, f.tell()))
    return out


def _read(f: BinaryIO, start: int, end: int) -> bytes:
    f.seek(start)
    data = f.read(end - start)
    if len(data) != end - start:
        raise WireError("truncated field")
    return data


def _len_field(number: int, payload: bytes) -> bytes:
    return _encode_varint(number << 3 | _LEN) + _encode_varint(len(payload)) + payload


def _external(location: str, offset: int, length: int) -> bytes:
    tensor = onnx.TensorProto(data_location=onnx.TensorProto.EXTERNAL)
    for key, value in (("location", location), ("offset", str(offset)), ("length", str(length))):
        tensor.external_data.add(key=key, value=value)
    return tensor.SerializeToString()


def _copy(f: BinaryIO, start: int, end: int, transform: dict[int, Callable[[int, int], bytes]]) -> bytes:
    """The message between ``start`` and ``end``, each length-delimited field named in ``transform``
    replaced by what its function makes of the payload's bounds."""
    f.seek(start)
    out = bytearray()
    for number, wire, field_start, payload, field_end in _fields(f, end):
        replace = transform.get(number) if wire == _LEN else None
        out += _read(f, field_start, field_end) if replace is None else replace(payload, field_end)
    return bytes(out)


def _walk(f: BinaryIO, size: int, location: str, inline_limit: int) -> bytes:
    def initializer(start: int, end: int) -> bytes:
        external: list[bytes] = []

        def raw_data(data_start: int, data_end: int) -> bytes:
            if data_end - data_start <= inline_limit:
                return _len_field(_TENSOR_RAW_DATA, _read(f, data_start, data_end))
            external.append(_external(location, data_start, data_end - data_start))
            return b""

        body = _copy(f, start, end, {_TENSOR_RAW_DATA: raw_data})
        # Serialized fields concatenate as a merge where a later scalar wins: put the external
        # reference last, past any explicit data_location=DEFAULT the tensor carried.
        return _len_field(_GRAPH_INITIALIZER, body + b"".join(external))

    def graph(start: int, end: int) -> bytes:
        return _len_field(_MODEL_GRAPH, _copy(f, start, end, {_GRAPH_INITIALIZER: initializer}))

    return _copy(f, 0, size, {_MODEL_GRAPH: graph})


def read_skeleton(path: Path, inline_limit: int = INLINE_LIMIT_BYTES) -> onnx.ModelProto:
    """The model at ``path`` with large initializers as external data pointing into ``path`` itself.

    Raises WireError (a ValueError) where the file is not a protobuf message; the caller parses the
    file the ordinary way then, for its error message.
    """
    with path.open("rb") as f:
        size = f.seek(0, io.SEEK_END)
        f.seek(0)
        data = _walk(f, size, path.name, inline_limit)
    model = onnx.ModelProto()
    model.ParseFromString(data)
    return model
