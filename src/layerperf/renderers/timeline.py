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

import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import numpy as np
import orjson

from layerperf.data.calls import Calls
from layerperf.errors import InputError
from layerperf.renderers.files import write_atomic
from layerperf.util.gc_pause import gc_paused

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
    with gc_paused():  # dicts of numbers and strings form no cycles: nothing for a collection to find
        f.write(b'{"traceEvents":' + orjson.dumps(timeline.metadata())[:-1])
        sep = b"," if timeline.metadata() else b""
        for chunk in timeline.chunks():
            if chunk:
                f.write(sep + orjson.dumps(chunk)[1:-1])
                sep = b","
        f.write(b'],"displayTimeUnit":"ns","otherData":' + orjson.dumps(timeline.other()) + b"}")


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
        return _metadata(self.table.meta, self.pid, self.tid, self.unknown_pid, self.unknown_tid)

    def chunks(self) -> Iterator[list[dict[str, Any]]]:
        for start in range(0, self.rows.size, CHUNK_ROWS):
            at = slice(start, start + CHUNK_ROWS)
            yield _calls(self.table, self.rows[at], self.pid[at], self.tid[at])

    def other(self) -> dict[str, Any]:
        meta = self.table.meta
        return {"source": meta.get("source"), "format": meta.get("format"), "ts_origin_us": meta.get("ts_origin_us"),
                "calls": int(self.rows.size), "untimed_calls": len(self.table) - int(self.rows.size)}


CHUNK_ROWS = 1 << 16


class Streamed:
    """A timeline written to ``f`` as a trace's calls come, a table at a time (``add``; :meth:`finish` ends it),
    never holding more than a chunk of events: memory does not grow with the trace. ``keep`` picks the rows a
    table contributes (the row filters). The calls go in the order the tables come, the metadata events
    last. A call whose process or thread the trace did not say waits on disk (``directory``), its id a
    placeholder, until the fresh id that names it — one past the largest id of the calls, as for a whole
    table — is known at the end."""

    def __init__(self, f: IO[bytes], directory: Path, keep: Any = None) -> None:
        self.f, self.keep = f, keep
        self.held = tempfile.TemporaryFile(dir=directory)  # noqa: SIM115 - closed on leaving (``with``)
        self.mark = f"unknown-{uuid.uuid4().hex}"
        self.max_pid = self.max_tid = UNKNOWN
        self.tracks: set[tuple[int, bool]] = set()  # (pid, thread unknown) of every call written
        self.calls = self.untimed = 0
        self.sep = b""
        f.write(b'{"traceEvents":[')

    def add(self, table: Calls) -> None:
        table = self.keep(table) if self.keep is not None else table
        rows = np.flatnonzero(~np.isnan(table.ts_ns))
        self.untimed += len(table) - int(rows.size)
        self.calls += int(rows.size)
        if not rows.size:
            return
        pid, tid = table.pid[rows], table.tid[rows]
        self.max_pid, self.max_tid = max(self.max_pid, int(pid.max())), max(self.max_tid, int(tid.max()))
        self.tracks.update(zip(pid.tolist(), (tid == UNKNOWN).tolist(), strict=True))
        with gc_paused():
            for lo in range(0, rows.size, CHUNK_ROWS):
                at = slice(lo, lo + CHUNK_ROWS)
                self._write(_calls(table, rows[at], pid[at], tid[at]))

    def _write(self, events: list[dict[str, Any]]) -> None:
        known = [e for e in events if e["pid"] != UNKNOWN and e["tid"] != UNKNOWN]
        if known:
            self.f.write(self.sep + orjson.dumps(known)[1:-1])
            self.sep = b","
        if len(known) < len(events):
            for e in events:
                for key in ("pid", "tid"):
                    if e[key] == UNKNOWN:
                        e[key] = self.mark + key
            self.held.write(orjson.dumps([e for e in events if isinstance(e["pid"], str) or
                                          isinstance(e["tid"], str)])[1:-1] + b"\n")

    def finish(self, meta: dict[str, Any]) -> None:
        """The calls held back, with their fresh ids, then the metadata and ``otherData`` (from ``meta``)."""
        fresh = {key: str(top + 1).encode() for key, top in (("pid", self.max_pid), ("tid", self.max_tid))}
        self.held.seek(0)
        for line in self.held:
            for key, value in fresh.items():
                line = line.replace(b'"' + (self.mark + key).encode() + b'"', value)
            self.f.write(self.sep + line.rstrip(b"\n"))
            self.sep = b","
        unknown_pid = self.max_pid + 1 if any(p == UNKNOWN for p, _ in self.tracks) else None
        unknown_tid = self.max_tid + 1 if any(t for _, t in self.tracks) else None
        tracks = sorted(self.tracks)
        pid = np.asarray([self.max_pid + 1 if p == UNKNOWN else p for p, _ in tracks], dtype=np.int64)
        tid = np.asarray([self.max_tid + 1 if t else 0 for _, t in tracks], dtype=np.int64)
        metadata = _metadata(meta, pid, tid, unknown_pid, unknown_tid)
        if metadata:
            self.f.write(self.sep + orjson.dumps(metadata)[1:-1])
        other = {"source": meta.get("source"), "format": meta.get("format"), "ts_origin_us": meta.get("ts_origin_us"),
                 "calls": self.calls, "untimed_calls": self.untimed}
        self.f.write(b'],"displayTimeUnit":"ns","otherData":' + orjson.dumps(other) + b"}")

    def __enter__(self) -> Streamed:
        return self

    def __exit__(self, *exc: object) -> None:
        self.held.close()  # also when the reading failed: the calls held back go with it


def _viewer_ids(ids: np.ndarray) -> tuple[np.ndarray, int | None]:
    """Ids as viewers take them: an unknown one becomes a fresh id (one past the largest) named
    "unknown" by a metadata event, since viewers need an id on every event. (The id, and None when
    no id is unknown.)"""
    unknown = ids == UNKNOWN
    if not unknown.any():
        return ids, None
    fresh = max(int(ids.max()), UNKNOWN) + 1
    return np.where(unknown, fresh, ids), fresh


def _metadata(meta: dict[str, Any], pid: np.ndarray, tid: np.ndarray, unknown_pid: int | None,
              unknown_tid: int | None) -> list[dict[str, Any]]:
    source = Path(str(meta.get("source") or "trace")).name
    label = f"{source} ({meta.get('format', 'trace')})"
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
