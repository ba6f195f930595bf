"""A timeline of any event table: Chrome Trace Event Format JSON that Perfetto and chrome://tracing open.

Each row of a :class:`~layerperf.data.calls.Calls` read from a trace is one call, with its start
(``ts_ns``), its whole duration (``incl_ns``: what ran inside it included), its process and thread.
Each becomes a complete event (``"ph": "X"``) named after the call, its category the op type, its
arguments what the table knows of it: provider, shapes, and FLOPs, integer operations, bytes and
device time where known. Times are those of the table, so a call nested in another on the same
thread lies within it as it did in the trace; whatever produced the trace (ONNX Runtime's profiler,
PyTorch, layerperf), the timeline reads the same way. Aggregated rows are no single call: a table
of them has no timeline.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import numpy as np
import orjson

from layerperf.data.calls import Calls
from layerperf.errors import InputError
from layerperf.renderers.files import write_atomic

UNKNOWN = -1  # the pid/tid of a call whose process or thread the trace did not say


def check(table: Calls) -> None:
    """Raise InputError when the table has calls but no start times (aggregated, say)."""
    if len(table) and not table.has_times:
        what = f"{table.meta.get('source')}: " if table.meta.get("source") else ""
        raise InputError(f"{what}no start times in this table (aggregated rows are no single call): "
                         "nothing to place on a timeline")


def document(table: Calls) -> dict[str, Any]:
    """The timeline of ``table`` as a Trace Event Format object (``traceEvents``, ``displayTimeUnit``)."""
    check(table)
    timeline = _Timeline(table)
    events = timeline.metadata() + [e for chunk in timeline.chunks() for e in chunk]
    return {"traceEvents": events, "displayTimeUnit": "ns", "otherData": timeline.other()}


def write(table: Calls, f: IO[bytes]) -> None:
    """Write the timeline of ``table`` to an open binary file, a chunk of calls at a time (a million
    calls are a million dicts: made and written in chunks, they never all exist at once)."""
    check(table)
    timeline = _Timeline(table)
    was_enabled = gc.isenabled()
    gc.disable()  # dicts of numbers and strings form no cycles: nothing for a collection to find
    try:
        f.write(b'{"traceEvents":' + orjson.dumps(timeline.metadata())[:-1])
        sep = b"," if timeline.metadata() else b""
        for chunk in timeline.chunks():
            if chunk:
                f.write(sep + orjson.dumps(chunk)[1:-1])
                sep = b","
        f.write(b'],"displayTimeUnit":"ns","otherData":' + orjson.dumps(timeline.other()) + b"}")
    finally:
        if was_enabled:
            gc.enable()


def save(table: Calls, path: str | Path) -> Path:
    """Write the timeline of ``table`` to ``path``, whole or not at all."""

    check(table)  # before any file is made
    return write_atomic(Path(path), lambda f: write(table, f))


class _Timeline:
    """The events of a table's timed rows, with ids a viewer takes."""

    def __init__(self, table: Calls) -> None:
        self.table = table
        self.rows = np.flatnonzero(~np.isnan(table.ts_ns))
        self.pid, self.unknown_pid = _viewer_ids(table.pid[self.rows])
        self.tid, self.unknown_tid = _viewer_ids(table.tid[self.rows])

    def metadata(self) -> list[dict[str, Any]]:
        return _metadata(self.table, self.pid, self.tid, self.unknown_pid, self.unknown_tid)

    def chunks(self) -> Iterator[list[dict[str, Any]]]:
        for start in range(0, self.rows.size, CHUNK_ROWS):
            at = slice(start, start + CHUNK_ROWS)
            yield _calls(self.table, self.rows[at], self.pid[at], self.tid[at])

    def other(self) -> dict[str, Any]:
        meta = self.table.meta
        return {"source": meta.get("source"), "format": meta.get("format"), "ts_origin_us": meta.get("ts_origin_us"),
                "calls": int(self.rows.size), "untimed_calls": len(self.table) - int(self.rows.size)}


CHUNK_ROWS = 1 << 16


def _viewer_ids(ids: np.ndarray) -> tuple[np.ndarray, int | None]:
    """Ids as viewers take them: an unknown one becomes a fresh id (one past the largest) named
    "unknown" by a metadata event, since viewers need an id on every event. (The id, and None when
    no id is unknown.)"""
    unknown = ids == UNKNOWN
    if not unknown.any():
        return ids, None
    fresh = max(int(ids.max()), UNKNOWN) + 1
    return np.where(unknown, fresh, ids), fresh


def _metadata(table: Calls, pid: np.ndarray, tid: np.ndarray, unknown_pid: int | None,
              unknown_tid: int | None) -> list[dict[str, Any]]:
    source = Path(str(table.meta.get("source") or "trace")).name
    label = f"{source} ({table.meta.get('format', 'trace')})"
    out = []
    for p in np.unique(pid).tolist():
        name = f"unknown process: {label}" if p == unknown_pid else label
        out.append({"ph": "M", "name": "process_name", "pid": p, "tid": 0, "args": {"name": name}})
    if unknown_tid is not None:
        for p in np.unique(pid[tid == unknown_tid]).tolist():
            out.append({"ph": "M", "name": "thread_name", "pid": p, "tid": unknown_tid,
                        "args": {"name": "unknown thread"}})
    return out


def _calls(table: Calls, rows: np.ndarray, pid: np.ndarray, tid: np.ndarray) -> list[dict[str, Any]]:
    # Trace Event Format times are µs; three decimals keep ns
    ts = np.round(table.ts_ns[rows] / 1e3, 3).tolist()
    dur = np.round(table.incl_ns[rows] / 1e3, 3).tolist()
    names, types = table.name.take(rows).tolist(), table.op_type.take(rows).tolist()
    device = np.round(table.device_ns[rows] / 1e3, 3) if table.has_device else np.full(rows.size, np.nan)
    # calls of one node mostly have equal arguments: one dict each, made once (and a key per call)
    keys = zip(table.provider.codes[rows].tolist(), table.in_shapes.codes[rows].tolist(),
               table.out_shapes.codes[rows].tolist(), _known(table.flops[rows]), _known(table.int_ops[rows]),
               _known(table.bytes[rows]), _known(device), strict=True)
    made: dict[tuple[Any, ...], dict[str, Any]] = {}
    args = [made.get(k) or made.setdefault(k, _args(table, k)) for k in keys]
    return [{"ph": "X", "name": n, "cat": c, "ts": t0, "dur": d, "pid": p, "tid": t, "args": a}
            for n, c, t0, d, p, t, a in zip(names, types, ts, dur, pid.tolist(), tid.tolist(), args, strict=True)]


def _args(table: Calls, key: tuple[Any, ...]) -> dict[str, Any]:
    provider, ins, outs, *figures = key
    args: dict[str, Any] = {"provider": table.provider.values[provider]}
    if table.in_shapes.values[ins]:
        args["in_shapes"] = table.in_shapes.values[ins]
    if table.out_shapes.values[outs]:
        args["out_shapes"] = table.out_shapes.values[outs]
    for name, value in zip(("flops", "int_ops", "bytes", "device_us"), figures, strict=True):
        if value is not None:
            args[name] = value
    return args


def _known(values: np.ndarray) -> list[Any]:
    """Per row: the figure (an int where whole), or None where unknown (NaN)."""
    return [None if v != v else int(v) if v.is_integer() else v for v in values.tolist()]
