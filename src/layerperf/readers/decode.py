"""Trace events as typed records, decoded straight from JSON bytes with msgspec.

A million-event trace parsed into dicts is ~15 million Python objects: most of the time goes into
building lists for shapes and dicts for arguments nobody reads. Decoding into these records keeps
only the fields the readers use, leaves shapes as raw JSON bytes (``msgspec.Raw``; a node's shapes
repeat call after call, so they are compared as bytes and parsed once per distinct value) and skips
every other argument without building it. On the 1M-event benchmark trace this decodes ~6x faster
than ``orjson.loads`` into dicts.

Values are kept as they come (``Any``) so a field of an unexpected type never fails the decode; the
readers check types. Only a non-object event or ``args`` can fail it, and then :func:`decode_events`
falls back to decoding each event on its own, keeping what is usable.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from operator import attrgetter
from typing import Any

import msgspec
import orjson

NO_RAW = msgspec.Raw()  # an absent raw field; falsy


class KinetoArgs(msgspec.Struct, frozen=True, omit_defaults=True, gc=False):
    """The arguments a PyTorch (Kineto) trace's reader decodes: those such a trace holds, and the three every
    reader decodes that such a trace lacks, so that a value the decoder refuses there (a number out of range,
    bad UTF-8) fails a chunk as it does with :class:`Args`, wherever it lies."""

    op_name: Any = None  # ONNX Runtime
    op_type: Any = None  # layerperf, generic
    provider: Any = None
    input_dims: msgspec.Raw = msgspec.field(default=NO_RAW, name="Input Dims")  # PyTorch: [[1, 3, 8, 8], []]
    input_type: msgspec.Raw = msgspec.field(default=NO_RAW, name="Input type")  # PyTorch: ["float", "Scalar"]
    concrete_inputs: msgspec.Raw = msgspec.field(default=NO_RAW, name="Concrete Inputs")  # ["", "[1, 1]", "1"]
    flops: Any = None
    bytes: Any = None
    device: Any = None  # PyTorch GPU activity
    external_id: Any = msgspec.field(default=None, name="External id")
    external_id_v1: Any = msgspec.field(default=None, name="external id")  # Kineto of PyTorch 1.8/1.9
    correlation: Any = None


class Args(KinetoArgs, frozen=True):
    """The arguments of an event that any reader looks at (:class:`KinetoArgs`'s and the other readers'); others
    are skipped while decoding."""

    in_shapes: msgspec.Raw = NO_RAW
    out_shapes: msgspec.Raw = NO_RAW
    input_type_shape: msgspec.Raw = NO_RAW  # ONNX Runtime: [{"float": [1, 3, 8, 8]}, ...]
    output_type_shape: msgspec.Raw = NO_RAW
    output_dims: msgspec.Raw = msgspec.field(default=NO_RAW, name="Output Dims")
    layerperf_counters: msgspec.Raw = NO_RAW  # {label: count}: layerperf.onnxruntime's per-node counters
    layer: msgspec.Raw = NO_RAW  # layerperf's own layer/run events
    run: msgspec.Raw = NO_RAW


NO_ARGS = Args()
_RAW_FIELDS = tuple(f for f in Args.__struct_fields__ if isinstance(getattr(NO_ARGS, f), msgspec.Raw))


def detached(args: Args) -> Args:
    """``args`` with its raw fields in bytes of their own. A decoded raw field is a view into the whole block
    it was decoded from and keeps that block alive: arguments kept for later comparison (a node's first) would
    hold a block of the file each, and a trace naming new nodes throughout would stay in memory whole."""
    own = {f: msgspec.Raw(bytes(v)) for f in _RAW_FIELDS if (v := getattr(args, f))}
    return msgspec.structs.replace(args, **own) if own else args


def detached_raw(value: Any) -> Any:
    """A raw field in bytes of its own (see :func:`detached`); anything else as it is."""
    return msgspec.Raw(bytes(value)) if isinstance(value, msgspec.Raw) and value else value


class _Fields(msgspec.Struct, omit_defaults=True, gc=False):
    """A Trace Event Format event's fields but its arguments."""

    name: Any = None
    ph: Any = None
    cat: Any = None
    ts: Any = None
    dur: Any = None
    pid: Any = None
    tid: Any = None


class Event(_Fields):
    """One Trace Event Format event."""

    args: Args = NO_ARGS  # "args": null (or not an object) decodes through the lenient path, without them


NO_KINETO_ARGS = KinetoArgs()


class KinetoEvent(_Fields):
    """:class:`Event` as a Kineto trace's reader decodes it: with fewer arguments to make (8 MB chunks of a
    generated Kineto trace decode ~22% faster)."""

    args: KinetoArgs = NO_KINETO_ARGS


@dataclass(frozen=True)
class Decoding:
    """How a chunk's events are decoded: as a whole array, and (the lenient path) an event at a time."""

    events: msgspec.json.Decoder[Any]
    event: msgspec.json.Decoder[Any]


GENERIC = Decoding(msgspec.json.Decoder(list[Event]), msgspec.json.Decoder(Event))
KINETO = Decoding(msgspec.json.Decoder(list[KinetoEvent]), msgspec.json.Decoder(KinetoEvent))
DECODE_ERRORS = (msgspec.DecodeError, UnicodeDecodeError)


def decode_events(data: bytes, decoding: Decoding = GENERIC) -> list[Any]:
    """The events of a JSON array of events: :class:`Event` (:class:`KinetoEvent` with :data:`KINETO`).

    Malformed JSON raises ``orjson.JSONDecodeError`` (orjson's position and message, which the file
    reader turns into line and column); a well-formed array whose items are not all usable events
    decodes item by item: what is not an object becomes a :data:`NOT_OBJECT` placeholder (counted and
    left out by the readers), ``args`` that are not an object are dropped.
    """
    try:
        return decoding.events.decode(data)
    except (msgspec.ValidationError, *DECODE_ERRORS):
        pass
    items = orjson.loads(data)  # malformed: raises with orjson's position
    return events_of(items, decoding) if isinstance(items, list) else []


NOT_OBJECT = "\x00not-an-object"  # the ``ph`` of what stands for an item that is no event object


def event_of(item: Any, decoding: Decoding = GENERIC) -> Any:
    """An already parsed event as an Event (a KinetoEvent with :data:`KINETO`); an item that is not an object
    stands as an Event whose ``ph`` is :data:`NOT_OBJECT` (so that readers count it), named by its JSON text;
    None for an object that makes no event."""
    if not isinstance(item, dict):
        return Event(name=orjson.dumps(item)[:60].decode("utf-8", "replace"), ph=NOT_OBJECT)
    for doc in (item, {k: v for k, v in item.items() if k != "args"}):
        try:
            return decoding.event.decode(orjson.dumps(doc))
        except (msgspec.ValidationError, *DECODE_ERRORS, orjson.JSONEncodeError):
            continue
    return None


def events_of(items: list[Any], decoding: Decoding = GENERIC) -> list[Any]:
    return [ev for ev in (event_of(item, decoding) for item in items) if ev is not None]


def raw_value(raw: msgspec.Raw) -> Any:
    """The JSON value of a raw field; None when absent."""
    return msgspec.json.decode(raw) if raw else None


def fields(items: Sequence[Any], names: tuple[str, ...]) -> list[list[Any]]:
    """The columns ``names`` of ``items`` (events or Args): one C loop per column.

    (A multi-field ``attrgetter`` and ``zip(*...)`` to transpose is twice as slow: a tuple per item.)
    """
    return [list(map(attrgetter(name), items)) for name in names]
