"""The timeline's data: every call of the runs the page holds, placed in lanes, for ``timeline.js`` to draw.

The page draws on a canvas, so every call of a run is drawn at any zoom (a call narrower than a pixel
still colours its pixel) and a run of 100,000 calls stays interactive. What it needs is compact:
per call its start (ns after the run's start, written as the difference from the call before it),
duration, name (an index into the page's names), lane (a thread, or a GPU stream) and nesting depth in
its lane; per device activity the same, its kind (computation, memory, communication, other, by
Holistic Trace Analysis's rules) and the call that launched it and the op it is device time of
(indices into its run's calls), so the page links each kernel to its op. Counters, where measured,
come per call.

Runs beyond :data:`MAX_CALLS` calls in all are listed on the runs strip but not held (the page says so);
the run drawn first is always held whole (up to :data:`MAX_RUN_CALLS`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from layerperf.analysis.gpu.intervals import KINDS, kinds, step_time
from layerperf.analysis.gpu_kernels import of as kernel_table
from layerperf.data import figures
from layerperf.data.calls import Calls, KernelTable
from layerperf.renderers.html.draw import short_kernel
from layerperf.renderers.html.runs import FAR, RunSet
from layerperf.renderers.svg import OTHER_COLOR

MAX_CALLS = 100_000  # calls (and device activities) the page holds over all its runs
MAX_RUN_CALLS = 250_000  # the run drawn first is held whole up to this many calls; cut beyond, saying so
# device kinds in colours no op type gets (the op types' palette is :data:`layerperf.renderers.svg.PALETTE`)
KIND_COLORS = {"computation": "#3b5b92", "memory": "#2ca02c", "communication": "#9467bd", "other": "#7f7f7f"}


@dataclass(frozen=True, slots=True)
class Held:
    """The runs the page holds (indices into the RunSet, the drawn run first) and the calls cut from the
    drawn run (beyond :data:`MAX_RUN_CALLS`)."""

    runs: tuple[int, ...]
    cut: int


def held_runs(runs: RunSet, kernel_counts: Sequence[int] = (), *, kept_only: bool = True) -> Held:
    """The drawn run, then warm-ups, outliers, the fastest and slowest, then the others in order, while
    their calls (and device activities) stay within :data:`MAX_CALLS`; with ``kept_only``, of a streamed
    trace's runs (``runs.sizes``) only those whose calls were kept."""
    sizes = [runs.size(k) + (kernel_counts[k] if k < len(kernel_counts) else 0) for k in range(len(runs))]
    first = runs.representative
    durations = runs.durations_ns
    order = [first, *range(runs.warmup), *runs.outliers]
    if len(runs):
        order += [int(np.argmin(durations)), int(np.argmax(durations))]
    order += list(range(len(runs)))
    held: list[int] = []
    total = 0
    for k in dict.fromkeys(order):
        if kept_only and runs.sizes and sizes[k] and not runs.rows[k].size:  # calls not kept (a streamed trace)
            continue
        if k == first or total + sizes[k] <= MAX_CALLS:
            held.append(k)
            total += min(sizes[k], MAX_RUN_CALLS) if k == first else sizes[k]
    return Held(tuple(held), max(runs.size(first) - MAX_RUN_CALLS, 0) if len(runs) else 0)


def depths(ts: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Each interval's nesting depth (intervals by start, the longer first at equal starts, so a parent comes
    before its children): how many intervals are still open when it starts."""
    out = np.zeros(ts.size, dtype=np.int64)
    open_ends: list[float] = []
    for i, (t, e) in enumerate(zip(ts.tolist(), end.tolist(), strict=True)):
        while open_ends and open_ends[-1] <= t:
            open_ends.pop()
        out[i] = len(open_ends)
        open_ends.append(e)
    return out


def _placed(lane: np.ndarray, ts: np.ndarray, dur: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(order, depth): the intervals by lane, depth, start; each one's depth within its lane."""
    depth = np.zeros(ts.size, dtype=np.int64)
    for value in np.unique(lane).tolist():
        idx = np.flatnonzero(lane == value)
        idx = idx[np.lexsort((-dur[idx], ts[idx]))]
        depth[idx] = depths(ts[idx], ts[idx] + dur[idx])
    return np.lexsort((ts, depth, lane)), depth


def _deltas(values: np.ndarray) -> list[int]:
    """Integers written as the difference from the one before (small numbers: a smaller page)."""
    ints = np.rint(values).astype(np.int64)
    return np.diff(ints, prepend=0).tolist() if ints.size else []


class _Table:
    """A string table for the page: each distinct string once, referred to by its index."""

    def __init__(self) -> None:
        self.index: dict[str, int] = {}

    def codes(self, strings: Sequence[str]) -> list[int]:
        return [self.index.setdefault(s, len(self.index)) for s in strings]

    def values(self) -> list[str]:
        return list(self.index)


class _Lanes:
    """The page's lanes: a CPU thread (pid, tid) or a GPU stream, each named for people."""

    def __init__(self, calls: Calls) -> None:
        self.index: dict[tuple[str, int, int], int] = {}
        self.pids = len(set(calls.pid.tolist()) - {-1})

    def of(self, kind: str, a: int, b: int) -> int:
        return self.index.setdefault((kind, a, b), len(self.index))

    def doc(self, devices: Sequence[str]) -> list[dict[str, Any]]:
        out = []
        for kind, a, b in self.index:
            if kind == "gpu":
                out.append({"name": f"{devices[a]} stream {b}", "gpu": True})
            else:
                who = "thread ?" if b < 0 else f"thread {b}"
                out.append({"name": who + (f" (pid {a})" if self.pids > 1 and a >= 0 else ""), "gpu": False})
        return out


def _kernel_runs(kernels: KernelTable | None, runs: RunSet) -> list[np.ndarray]:
    """The device activities of each run: launched (else started) inside its extent; all of them when the
    trace is one window."""
    if kernels is None or not len(kernels):
        return [np.zeros(0, dtype=np.int64) for _ in range(len(runs))]
    if len(runs) == 1:
        return [np.flatnonzero(~np.isnan(kernels.ts_ns))]
    when = step_time(kernels)
    return [np.flatnonzero((when >= s) & (when < e)) for s, e in zip(runs.starts_ns, runs.ends_ns, strict=True)]


def _launchers(calls: Calls, rows: np.ndarray, launch_ts: np.ndarray) -> np.ndarray:
    """For each launch time, the position in ``rows`` (a run's calls) of the call starting then (the
    runtime call that launched the activity); -1 where none does (NaN: launch unknown)."""
    if not rows.size:
        return np.full(launch_ts.size, -1, dtype=np.int64)
    ts = calls.ts_ns[rows]
    order = np.argsort(ts, kind="stable")
    at = np.clip(np.searchsorted(ts[order], launch_ts), 0, ts.size - 1)
    return np.where(np.abs(ts[order][at] - launch_ts) < 0.5, order[at], -1)


class _Builder:
    """Accumulates the held runs' parts of the page's timeline data."""

    def __init__(self, calls: Calls, kernels: KernelTable | None) -> None:
        self.calls, self.kernels = calls, kernels
        self.names, self.types, self.knames = _Table(), _Table(), _Table()
        self.lanes = _Lanes(calls)
        self.name_type: dict[int, int] = {}
        self.kind = kinds(kernels) if kernels is not None else np.zeros(0, dtype=object)
        self.devices = _Table()

    def calls_part(self, rows: np.ndarray, start_ns: float) -> tuple[dict[str, Any], np.ndarray]:
        """A run's calls, by lane, depth and start, and where each of ``rows`` went in that order."""
        c = self.calls
        ts = c.ts_ns[rows] - start_ns
        dur = np.nan_to_num(c.incl_ns[rows], nan=0.0)
        lane = np.asarray([self.lanes.of("cpu", p, t) for p, t in zip(c.pid[rows].tolist(), c.tid[rows].tolist(),
                                                                       strict=True)], dtype=np.int64)
        order, depth = _placed(lane, ts, dur)
        names = self.names.codes([c.name[int(r)] for r in rows[order]])
        types = self.types.codes([c.op_type[int(r)] for r in rows[order]])
        for n, y in zip(names, types, strict=True):
            self.name_type.setdefault(n, y)
        position = np.empty(rows.size, dtype=np.int64)
        position[order] = np.arange(rows.size)
        part = {"t": _deltas(ts[order]), "d": np.rint(dur[order]).astype(np.int64).tolist(), "n": names,
                "l": lane[order].tolist(), "z": depth[order].tolist()}
        return part, position

    def kernels_part(self, picked: np.ndarray, rows: np.ndarray, position: np.ndarray,
                     start_ns: float) -> dict[str, Any]:
        """A run's device activities, by lane, depth and start, each with its launching call and its op
        (positions in the run's calls; -1: none held)."""
        k = self.kernels
        assert k is not None
        ts = k.ts_ns[picked] - start_ns
        dur = k.dur_ns[picked]
        devices = self.devices.codes(k.device.take(picked).tolist())
        lane = np.asarray([self.lanes.of("gpu", d, s) for d, s in zip(devices, k.stream[picked].tolist(),
                                                                      strict=True)], dtype=np.int64)
        order, depth = _placed(lane, ts, dur)
        picked, ts, dur, lane, depth = picked[order], ts[order], dur[order], lane[order], depth[order]
        launch = _launchers(self.calls, rows, k.launch_ts_ns[picked])
        row_pos = np.full(len(self.calls), -1, dtype=np.int64)
        row_pos[rows] = position
        owner = k.owner[picked]
        own = np.where(owner >= 0, row_pos[np.maximum(owner, 0)], -1)
        return {"t": _deltas(ts), "d": np.rint(dur).astype(np.int64).tolist(), "l": lane.tolist(),
                "z": depth.tolist(), "n": self.knames.codes(k.name.take(picked).tolist()),
                "k": [KINDS.index(x) for x in self.kind[picked].tolist()],
                "src": np.where(launch >= 0, position[np.maximum(launch, 0)] if rows.size else -1, -1).tolist(),
                "own": own.tolist()}


def _counters(calls: Calls, rows: np.ndarray, position: np.ndarray, labels: Sequence[str]) -> dict[str, list[Any]]:
    out = {}
    for label in labels:
        values = np.empty(rows.size)
        values[position] = calls.counters[label][rows]
        out[label] = [None if v != v else float(f"{v:.4g}") for v in values.tolist()]
    return out


def _medians(calls: Calls, names: Sequence[str], known: Mapping[str, float] | None = None) -> list[float | None]:
    """Each held name's median drawn duration over all its calls in the trace (ns): from ``calls``, or
    ``known`` where ``calls`` holds only some of them (a streamed trace)."""
    if known is None:
        g = figures.groups(calls.name.codes, len(calls.name.values))
        med = figures.grouped(calls.incl_ns, g, "median")
        code = {v: i for i, v in enumerate(calls.name.values)}
        known = {n: float(med[code[n]]) for n in names}
    return [None if (m := known.get(n, float("nan"))) != m else round(m) for n in names]


def timeline_data(calls: Calls, runs: RunSet, colors: Mapping[str, str], counters: Sequence[Mapping[str, str]] = (),
                  scale_ns: float | None = None, medians: Mapping[str, float] | None = None) -> dict[str, Any]:
    """What ``timeline.js`` draws (see the module's docstring); ``counters``: the counter tracks
    (``label``, ``header``, ``unit``); ``scale_ns``: the time the first view spans (two timelines drawn to
    one scale), the drawn run's own when None; ``medians``: each name's median inclusive time over the
    whole trace where ``calls`` holds only some of its calls (a streamed trace)."""
    kernels = kernel_table(calls)
    per_run = _kernel_runs(kernels, runs)
    held = held_runs(runs, [k.size for k in per_run])
    b = _Builder(calls, kernels)
    parts = []
    for k in held.runs:
        rows = runs.rows[k][:MAX_RUN_CALLS]
        part, position = b.calls_part(rows, runs.starts_ns[k])
        doc: dict[str, Any] = {"run": k, "calls": part}
        if per_run[k].size:
            doc["kernels"] = b.kernels_part(per_run[k], rows, position, runs.starts_ns[k])
        if counters:
            doc["counters"] = _counters(calls, rows, position, [c["label"] for c in counters])
        parts.append(doc)
    names, types = b.names.values(), b.types.values()
    durations = runs.durations_ns
    return {
        "noun": runs.noun, "how": runs.how, "far": FAR, "scale": scale_ns,
        "runs": {"start": np.rint(runs.starts_ns).astype(np.int64).tolist(),
                 "dur": np.rint(durations).astype(np.int64).tolist(), "warmup": runs.warmup,
                 "outliers": list(runs.outliers), "drawn": runs.representative, "median": runs.median_ns,
                 "held": list(held.runs), "split": runs.split},
        "cut": held.cut,
        "lanes": b.lanes.doc(b.devices.values()),
        "names": names, "types": types, "ntype": [b.name_type[i] for i in range(len(names))],
        "colors": [colors.get(t, OTHER_COLOR) for t in types],
        "medians": _medians(calls, names, medians),
        "knames": b.knames.values(), "kshort": [short_kernel(n) for n in b.knames.values()],
        "kinds": list(KINDS), "kcolors": [KIND_COLORS[k] for k in KINDS],
        "counters": list(counters), "parts": parts,
    }
