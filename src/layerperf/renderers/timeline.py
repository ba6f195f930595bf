"""A timeline of any event table: Chrome Trace Event Format JSON that Perfetto and chrome://tracing open.

Each row of a :class:`~layerperf.calls.Calls` read from a trace is one call, with its start
(``ts_ns``), its whole duration (``incl_ns``: what ran inside it included), its process and thread.
Each becomes a complete event (``"ph": "X"``) named after the call, its category the op type, its
arguments what the table knows of it: provider, shapes, and FLOPs, integer operations, bytes and
device time where known. Times are those of the table, so a call nested in another on the same
thread lies within it as it did in the trace; whatever produced the trace (ONNX Runtime's profiler,
PyTorch, layerperf), the timeline reads the same way. Aggregated rows are no single call: a table
of them has no timeline.
"""

from __future__ import annotations

from pathlib import Path
from typing import IO, Any

import numpy as np
import orjson

from layerperf.calls import Calls
from layerperf.errors import InputError

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
    timed = np.flatnonzero(~np.isnan(table.ts_ns))
    pid, unknown_pid = _viewer_ids(table.pid[timed])
    tid, unknown_tid = _viewer_ids(table.tid[timed])
    events = _metadata(table, pid, tid, unknown_pid, unknown_tid) + _calls(table, timed, pid, tid)
    meta = table.meta
    other = {"source": meta.get("source"), "format": meta.get("format"), "ts_origin_us": meta.get("ts_origin_us"),
             "calls": int(timed.size), "untimed_calls": len(table) - int(timed.size)}
    return {"traceEvents": events, "displayTimeUnit": "ns", "otherData": other}


def write(table: Calls, f: IO[bytes]) -> None:
    """Write the timeline of ``table`` to an open binary file."""
    f.write(orjson.dumps(document(table)))


def save(table: Calls, path: str | Path) -> Path:
    """Write the timeline of ``table`` to ``path``, whole or not at all."""
    from layerperf.renderers.files import write_atomic

    check(table)  # before any file is made
    return write_atomic(Path(path), lambda f: write(table, f))


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
    names, types, providers, ins, outs = (table.labels(c).take(rows).tolist()
                                          for c in ("name", "op_type", "provider", "in_shapes", "out_shapes"))
    figures = {"flops": table.flops, "int_ops": table.int_ops, "bytes": table.bytes}
    known = {k: _known(v[rows]) for k, v in figures.items()}
    device = _known(np.round(table.device_ns[rows] / 1e3, 3)) if table.has_device else [None] * rows.size
    out = []
    for i, (p, t) in enumerate(zip(pid.tolist(), tid.tolist(), strict=True)):
        args: dict[str, Any] = {"provider": providers[i]}
        if ins[i]:
            args["in_shapes"] = ins[i]
        if outs[i]:
            args["out_shapes"] = outs[i]
        for key, values in known.items():
            if values[i] is not None:
                args[key] = values[i]
        if device[i] is not None:
            args["device_us"] = device[i]
        out.append({"ph": "X", "name": names[i], "cat": types[i], "ts": ts[i], "dur": dur[i], "pid": p, "tid": t,
                    "args": args})
    return out


def _known(values: np.ndarray) -> list[Any]:
    """Per row: the figure (an int where whole), or None where unknown (NaN)."""
    return [None if v != v else int(v) if v.is_integer() else v for v in values.tolist()]
