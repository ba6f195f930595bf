"""Read any supported trace into an Calls, telling its producer from the document itself.

- layerperf: an object with ``otherData.layerperf_format`` (a ``trace.json``, or the profile
  directory holding one);
- ONNX Runtime (``enable_profiling``): events whose ``cat`` is Session or Node (Api) with what only its
  profiler writes among them — a ``<node>_kernel_time`` Node event, a Node event with ``op_name`` or
  ``provider`` args, or one of its Session events (``model_loading_*``, ``session_initialization``,
  ``model_run``, ``*Executor::Execute``) — as a JSON array or wrapped in an object's ``traceEvents`` (by
  content, not by the container's shape: a plain trace whose events are all ``"cat": "Node"`` is no
  profile of ONNX Runtime's);
- PyTorch (Kineto): an object with ``schemaVersion``/``deviceProperties``, or whose events have
  ``cat`` cpu_op, kernel or cuda_runtime;
- anything else in Trace Event Format: a JSON array of events or an object with ``traceEvents``.

Any of them may be gzipped (by content, whatever the name).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from layerperf.data.calls import Calls
from layerperf.data.fold import Folded
from layerperf.errors import InputError
from layerperf.readers import kineto, kineto_stream, ort, parallel, streaming, tef
from layerperf.readers.decode import Event
from layerperf.readers.layerperf import profile_from_doc, resolve_path
from layerperf.readers.stream import BLOCK_BYTES, EventStream, load_json, open_events
from layerperf.util.gc_pause import gc_paused

FORMATS = ("layerperf", "ort", "kineto", "tef")
ORT_CATS = frozenset(("Session", "Node"))
ORT_SESSION_EVENTS = frozenset(("session_initialization", ort.RUN_EVENT))  # and model_loading_*, *Executor::Execute
KINETO_CATS = frozenset(("cpu_op", "kernel", "cuda_runtime", "cuda_driver", "gpu_memcpy", "python_function"))
KINETO_KEYS = ("schemaVersion", "deviceProperties")
_SAMPLE = 1000  # events looked at to tell the producer


def _cats(events: list[Event]) -> set[str]:
    return {ev.cat for ev in events[:_SAMPLE] if isinstance(ev.cat, str)}


def _is_layerperf(skeleton: Any) -> bool:
    other = skeleton.get("otherData") if isinstance(skeleton, dict) else None
    return isinstance(other, dict) and "layerperf_format" in other


def _looks_layerperf(events: list[Event]) -> bool:
    """layerperf's own events, for a file too big to have read its otherData yet."""
    return any(ev.cat in ("layer", "run") and bool(ev.args.layer or ev.args.run)
               for ev in events[:_SAMPLE])


def _ort_signed(ev: Event) -> bool:
    """An event only ONNX Runtime's profiler writes (see the module's docstring)."""
    name = ev.name if isinstance(ev.name, str) else ""
    if ev.cat == "Node":
        return name.endswith(ort.KERNEL_SUFFIX) or ev.args.op_name is not None or ev.args.provider is not None
    return ev.cat == "Session" and (name in ORT_SESSION_EVENTS or name.startswith("model_loading_")
                                    or name.endswith("Executor::Execute"))


def detect(head: Any, events: list[Event]) -> str:
    """The producer of a document from what precedes its events and its first events."""
    if _is_layerperf(head):
        return "layerperf"
    cats = _cats(events)
    # by content, whatever the container: ONNX Runtime's events wrapped in {"traceEvents": ...} are its
    if cats and cats <= ORT_CATS | {"Api"} and any(map(_ort_signed, events[:_SAMPLE])):
        return "ort"
    if isinstance(head, dict) and any(k in head for k in KINETO_KEYS) or cats & KINETO_CATS:
        return "kineto"
    return "tef"


def resolve(path: Path) -> Path:
    """A profile directory stands for the trace.json inside it."""
    return resolve_path(path)


def read_table(path: str | Path, *, block: int = BLOCK_BYTES) -> Calls:
    """The calls of every op in the trace at ``path``, one row each; raises InputError when unreadable."""
    table = _without_gc(lambda: _read_table(Path(path), block, None))
    assert isinstance(table, Calls)
    return table


def read_folded(path: str | Path, *, quantiles: bool = False, activities: bool = False,
                sink: Callable[[Calls], None] | None = None, block: int = BLOCK_BYTES) -> Folded | Calls:
    """The trace at ``path`` for analysis: an ONNX Runtime profile, a PyTorch trace or a Trace Event
    Format file folded into per-op accumulators in bounded memory (:mod:`layerperf.readers.streaming`;
    ``quantiles``: keep what medians need; ``activities``: a PyTorch trace's device activities too, on disk
    with what the GPU views and the per-kernel view read, as ``meta["activities"]`` (a
    :class:`~layerperf.readers.kineto_activities.DiskActivities`, which the caller closes); ``sink``: handed
    each table of calls as it is folded), any other trace as its table (:func:`read_table`; ``sink`` unused).
    InputError when unreadable."""
    return _without_gc(lambda: _read_table(Path(path), block, quantiles, activities, sink))


def release(table: Calls | Folded) -> None:
    """Remove what :func:`read_folded` left on disk with ``table`` (a PyTorch trace's device activities),
    if anything; a table read otherwise is left as it is."""
    if (activities := table.meta.get("activities")) is not None:
        activities.close()


def _without_gc(work: Any) -> Any:
    # Reading makes millions of objects that form no cycles (records, lists, strings), and each few
    # hundred thousand container allocations would start a collection that walks them all.
    with gc_paused():
        return work()


def _is_onnx_model(path: Path) -> bool:
    """An .onnx file, or one that starts as a serialized ModelProto does (its ir_version field, tag
    0x08), which no JSON or gzip file does."""
    if path.suffix.lower() == ".onnx":
        return True
    try:
        with path.open("rb") as f:
            return f.read(1) == b"\x08"
    except OSError:
        return False  # reading it properly says what is wrong


def _read_table(path: Path, block: int, quantiles: bool | None, activities: bool = False,
                sink: Callable[[Calls], None] | None = None) -> Calls | Folded:
    """The trace's table; folded instead (``quantiles`` not None) where its format streams."""
    trace = resolve(path)
    if trace.is_file() and _is_onnx_model(trace):
        raise InputError(f"{trace} is an ONNX model, not a trace",
                         hint=f"profile it with: layerperf profile {trace}")

    split = block == BLOCK_BYTES and parallel.worth_it(trace, gzipped_too=quantiles is not None)
    # a file to be read in parts is opened only to tell its format: from a small first block
    stream = open_events(trace, block=parallel.PEEK_BYTES if split else block)
    if stream.form == "other":
        raise InputError(f"{trace} is not a trace: expected a JSON array of events or an object with "
                         f"traceEvents, got {_kind(stream.head)}",
                         hint="supported: layerperf trace.json, ONNX Runtime profile, PyTorch profiler trace, "
                              "Trace Event Format")
    fmt = detect(stream.head, stream.first)
    meta = {"source": str(trace)}
    if fmt == "layerperf" or (stream.form == "object" and _looks_layerperf(stream.first)):
        table = _layerperf(trace, stream, meta, block)
    elif fmt == "kineto" and quantiles is not None:
        return kineto_stream.fold(stream, meta, quantiles=quantiles, path=trace, split=split, activities=activities,
                                  sink=sink)
    elif fmt == "kineto":
        table = kineto.read(stream, meta)
    elif quantiles is not None:
        reader = ort if fmt == "ort" else tef
        if split:
            stream.close()
        folded = streaming.fold(trace, reader, None if split else stream, meta, split=split, quantiles=quantiles,
                                sink=sink)
        if folded.calls == 0:
            raise _no_timed(trace, folded.meta)
        return folded
    else:
        reader = ort if fmt == "ort" else tef
        in_parts = None
        if split:
            stream.close()
            in_parts = parallel.read(trace, reader, meta)
            if in_parts is None:  # read it the ordinary way (which also reports any error rightly)
                stream = open_events(trace, block=block)
        table = in_parts if in_parts is not None else reader.read(stream, meta)
    if len(table) == 0 and not table.meta.get("empty"):
        raise _no_timed(trace, table.meta)
    table.meta["total_ns"] = float(table.total_ns.sum())
    return table


def _no_timed(trace: Path, meta: dict[str, Any]) -> InputError:
    """A trace with no timed op: how many events it has, and why those that were timed were left out."""
    n = int(meta.get("events", 0))
    left = "; ".join(f"{int(v.get('events', 0))} left out: {why}" for why, v in (meta.get("dropped") or {}).items())
    return InputError(f"{trace} has no timed events ({meta.get('format')} trace with {n} event{'' if n == 1 else 's'}, "
                      f"none of them a timed op{'; ' + left if left else ''})")


def _kind(doc: Any) -> str:
    if isinstance(doc, dict):
        if "traceEvents" in doc:
            inner = doc["traceEvents"]
            return f"an object whose traceEvents is {'an object' if isinstance(inner, dict) else _kind(inner)}, " \
                   "not an array"
        keys = ", ".join(json.dumps(k) for k in list(doc)[:5])  # quoted and escaped: one line whatever they hold
        return f"an object with keys {keys}" if keys else "an empty object"
    return {list: "an array", str: "a string", bool: "a boolean", type(None): "null"}.get(type(doc), "a number")


def _layerperf(trace: Path, stream: EventStream, meta: dict[str, Any], block: int) -> Calls:
    """A layerperf trace goes through its Profile, the one reading of that format: the document is read
    once, whole (its otherData, written after the events, says whether it is one)."""
    stream.close()
    doc = load_json(trace)
    if not _is_layerperf(doc):  # looked like one but is not: any other TEF file
        del doc
        return tef.read(open_events(trace, block=block), meta)
    try:
        prof = profile_from_doc(doc, str(trace))
        table = prof.calls()
    except (AttributeError, KeyError, TypeError, ValueError, OverflowError) as exc:
        raise InputError(f"{trace} is a damaged layerperf trace ({type(exc).__name__}: {exc})") from None
    table.meta.update(meta)
    if not prof.runs:  # a valid profile of no timed run (every run was warm-up): read as such, labelled
        table.meta["empty"] = next((w for w in prof.warnings if w.startswith("no timed run")),
                                   "no timed run: the profile is empty")
    return table
