"""A PyTorch profiler trace (``prof.export_chrome_trace``; Kineto's JSON) as an Calls.

Rows are the CPU-side calls — ``cpu_op`` (aten operators, with ``Input Dims`` when shapes were
recorded) and ``cuda_runtime``/``cuda_driver`` calls (kernel launches) — with self time computed from
their nesting on each thread. GPU activity (``kernel``, ``gpu_memcpy``, ``gpu_memset``) is device
time of the op that launched it, linked the way Kineto links them: the activity's ``External id``
names the op; failing that its ``correlation`` names the runtime call that launched it, whose
``External id`` (or else the op around it on its thread) names the op. That is the op's self device
time; its inclusive device time adds the activity of every op nested in it (an ``aten::conv2d``
launches nothing itself, its ``aten::cudnn_convolution`` does). Activity that links to no op becomes
a row of its own, so no device time is dropped; every activity is also kept, with the op that
launched it, for the per-kernel view (:mod:`layerperf.analysis.gpu_kernels`).

Traces of PyTorch 1.8/1.9 name the categories ``Operator``, ``Runtime``, ``Kernel``, ``Memcpy``,
``Memset`` and the argument ``external id``; they read the same way.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from layerperf.cost.aten import recorded
from layerperf.data.calls import Annotations, Calls, Interner, KernelTable, Labels, TableBuilder, int_id, with_outer
from layerperf.data.nesting import enclosing, outermost, self_times
from layerperf.readers.decode import NOT_OBJECT, Event, raw_value
from layerperf.readers.devices import from_skeleton
from layerperf.readers.dropped import NOT_A_NUMBER, NOT_EVENT, Dropped, reason
from layerperf.readers.stream import EventStream
from layerperf.readers.tef import MAX_US, earliest, num, shapes_text, text, thread_ids, to_ns

ROW_CATS = ("cpu_op", "cuda_runtime", "cuda_driver")
V1_CATS = {"Operator": "cpu_op", "Runtime": "cuda_runtime", "Kernel": "kernel", "Memcpy": "gpu_memcpy",
           "Memset": "gpu_memset", "Python": "python_function"}
# CPU-side events that take part in nesting without being rows of their own
FRAME_CATS = ("user_annotation", "gpu_user_annotation", "python_function")
DEVICE_CATS = ("kernel", "gpu_memcpy", "gpu_memset")
_NONE = -1


def _id(value: Any) -> int:
    return value if type(value) is int else _NONE


def _external(args: Any) -> int:
    ext = _id(args.external_id)
    return ext if ext != _NONE else _id(args.external_id_v1)


@dataclass
class _Cpu:
    thread: list[int] = field(default_factory=list)
    ts_us: list[float] = field(default_factory=list)
    dur_us: list[float] = field(default_factory=list)
    ident: list[int] = field(default_factory=list)  # -1: a frame, not a row
    is_op: list[bool] = field(default_factory=list)
    flops: list[float] = field(default_factory=list)
    bytes: list[float] = field(default_factory=list)
    external: list[int] = field(default_factory=list)
    correlation: list[int] = field(default_factory=list)


@dataclass
class _Device:
    ts_us: list[float] = field(default_factory=list)
    dur_us: list[float] = field(default_factory=list)
    ident: list[int] = field(default_factory=list)
    name: list[str] = field(default_factory=list)
    kind: list[str] = field(default_factory=list)
    device: list[str] = field(default_factory=list)
    external: list[int] = field(default_factory=list)
    correlation: list[int] = field(default_factory=list)
    pid: list[int] = field(default_factory=list)
    tid: list[int] = field(default_factory=list)
    bytes: list[float] = field(default_factory=list)


ANNOTATION_CATS = ("user_annotation", "gpu_user_annotation")


def _stream_id(tid: Any) -> int:
    """A device activity's thread: its stream, written ``7`` or (PyTorch 1.8) ``"stream 7"``."""
    if type(tid) is str and tid.startswith("stream "):
        tid = tid[len("stream "):]
    return int_id(tid)


def _collect(events: list[Event], threads: Interner, builder: TableBuilder, cpu: _Cpu, dev: _Device,
             steps: list[tuple[float, float]], dropped: Dropped,
             notes: list[tuple[str, bool, float, float]]) -> None:
    """Append the chunk's CPU events to ``cpu``, its device activities to ``dev`` and the (start, duration)
    in µs of its ``ProfilerStep#N`` frames to ``steps``; count what is left out in ``dropped``."""
    for ev in events:
        if ev.ph != "X":
            if ev.ph == NOT_OBJECT:
                dropped.add(NOT_EVENT, 1, ev.name)
            continue
        cat = ev.cat
        ts, dur = num(ev.ts), num(ev.dur)
        if not (0 <= dur < MAX_US and abs(ts) < MAX_US):
            if V1_CATS.get(cat, cat) in ROW_CATS + FRAME_CATS + DEVICE_CATS:  # only what would have been read
                dropped.add(reason(ev.ts, ev.dur) or NOT_A_NUMBER, 1, ev.name)
            continue
        args = ev.args
        name = text(ev.name)
        cat = V1_CATS.get(cat, cat)
        if cat in DEVICE_CATS:
            device = args.device
            provider = f"GPU {device}" if type(device) is int else "GPU"
            dev.ident.append(builder.ident(name, str(cat), provider, "", ""))
            dev.ts_us.append(ts)
            dev.dur_us.append(dur)
            dev.pid.append(int_id(ev.pid))
            dev.tid.append(_stream_id(ev.tid))
            dev.name.append(name)
            dev.kind.append(str(cat))
            dev.device.append(provider)
            dev.external.append(_external(args))
            dev.correlation.append(_id(args.correlation))
            dev.bytes.append(num(args.bytes))
            continue
        if cat == "cpu_op" and name.startswith("ProfilerStep#"):
            cat = "user_annotation"  # PyTorch 1.8/1.9 recorded the step as an operator
        if cat in ANNOTATION_CATS:
            notes.append((name, cat == "gpu_user_annotation", ts, dur))
        if cat in ROW_CATS:
            ident = builder.ident(name, name, "CPU", shapes_text(raw_value(args.input_dims)), "")
        elif cat in FRAME_CATS:
            ident = _NONE
            if name.startswith("ProfilerStep#"):
                steps.append((ts, dur))
        else:
            continue
        pid, tid = ev.pid, ev.tid
        cpu.thread.append(threads.code((pid if not isinstance(pid, list | dict) else None,
                                        tid if not isinstance(tid, list | dict) else None)))
        cpu.ts_us.append(ts)
        cpu.dur_us.append(dur)
        cpu.ident.append(ident)
        cpu.is_op.append(cat == "cpu_op")
        flops, moved = num(args.flops), num(args.bytes)
        if flops != flops or moved != moved:  # NaN: the trace has none; derived from the recorded inputs
            derived = _derived(name, args)
            flops = derived[0] if flops != flops else flops
            moved = derived[1] if moved != moved else moved
        cpu.flops.append(flops)
        cpu.bytes.append(moved)
        cpu.external.append(_external(args))
        cpu.correlation.append(_id(args.correlation))


def _derived(name: str, args: Any) -> tuple[float, float]:
    """FLOPs and bytes of an op call from what the trace recorded of its inputs (the cost model's aten
    namespace); NaN where unknown."""
    if not args.input_dims or not recorded.costed(name):
        return math.nan, math.nan
    cost = recorded.cost(name, bytes(args.input_dims), bytes(args.input_type), bytes(args.concrete_inputs))
    return (math.nan if cost.flops is None else float(cost.flops),
            math.nan if cost.bytes is None else float(cost.bytes))


def _lookup(keys: np.ndarray, values: np.ndarray, wanted: np.ndarray) -> np.ndarray:
    """values[i] where keys[i] == wanted, for each wanted; -1 where absent or wanted is -1."""
    out = np.full(wanted.size, _NONE, dtype=np.int64)
    ok = keys != _NONE
    keys, values = keys[ok], values[ok]
    if not keys.size or not wanted.size:
        return out
    order = np.argsort(keys, kind="stable")
    keys, values = keys[order], values[order]
    at = np.clip(np.searchsorted(keys, wanted), 0, keys.size - 1)
    hit = (keys[at] == wanted) & (wanted != _NONE)
    out[hit] = values[at[hit]]
    return out


def _enclosing_op(parent: np.ndarray, is_op: np.ndarray, start: np.ndarray) -> np.ndarray:
    """For each event index in ``start``, the nearest cpu_op among itself and its ancestors."""
    at = start.copy()
    for _ in range(parent.size + 1):
        climb = (at >= 0) & ~is_op[np.maximum(at, 0)]
        if not climb.any():
            break
        at[climb] = parent[at[climb]]
    return at


def _link(cpu: _Cpu, dev: _Device, parent: np.ndarray, is_op: np.ndarray) -> np.ndarray:
    """For each device activity, the index of the CPU op whose device time it is (-1: none)."""
    index = np.arange(len(cpu.ts_us), dtype=np.int64)
    cpu_ext = np.asarray(cpu.external, dtype=np.int64)
    dev_ext = np.asarray(dev.external, dtype=np.int64)
    owner = _lookup(np.where(is_op, cpu_ext, _NONE), index, dev_ext)
    # no op with that External id: through the runtime call with the same correlation id
    launch = _lookup(np.where(is_op, _NONE, np.asarray(cpu.correlation, dtype=np.int64)), index,
                     np.asarray(dev.correlation, dtype=np.int64))
    missing = (owner < 0) & (launch >= 0)
    if missing.any():
        via_ext = _lookup(np.where(is_op, cpu_ext, _NONE), index, cpu_ext[launch[missing]])
        around = _enclosing_op(parent, is_op, launch[missing])
        owner[missing] = np.where(via_ext >= 0, via_ext, around)
    return owner


def _inclusive(parent: np.ndarray, owner: np.ndarray, dur_ns: np.ndarray) -> np.ndarray:
    """Per CPU event, the device time of the activities owned by it or by any event nested in it."""
    out = np.zeros(parent.size, dtype=np.float64)
    at = owner.copy()
    while (live := at >= 0).any():
        np.add.at(out, at[live], dur_ns[live])
        at[live] = parent[at[live]]
    return out


def _row_parents(parent: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """For each row (an event index), the row index of the nearest enclosing row, frames skipped."""
    row_of = np.full(parent.size, _NONE, dtype=np.int64)
    row_of[rows] = np.arange(rows.size)
    at = parent[rows]
    while (frame := (at >= 0) & (row_of[np.maximum(at, 0)] < 0)).any():
        at[frame] = parent[at[frame]]
    return np.where(at >= 0, row_of[np.maximum(at, 0)], _NONE)


def _kernel_table(dev: _Device, owner: np.ndarray, cpu: _Cpu, names: list[str], dur_ns: np.ndarray,
                  times: tuple[np.ndarray, np.ndarray, np.ndarray, float]) -> KernelTable:
    """The device activities with the op each is device time of, and (``times``: the CPU events' start
    and end in ns, their parents, the origin in µs) the runtime call that launched each."""
    start, end, is_op, origin_us = times
    idents = np.asarray(cpu.ident, dtype=np.int64)
    launcher = [names[idents[o]] if o >= 0 and idents[o] >= 0 else "" for o in owner.tolist()]
    correlation = np.asarray(dev.correlation, dtype=np.int64)
    launch = _lookup(np.where(is_op, _NONE, np.asarray(cpu.correlation, dtype=np.int64)),
                     np.arange(start.size, dtype=np.int64), correlation)
    has = launch >= 0
    launch_ts = np.where(has, start[np.maximum(launch, 0)] if start.size else np.nan, np.nan)
    launch_dur = np.where(has, (end - start)[np.maximum(launch, 0)] if start.size else np.nan, np.nan)
    rows = np.full(idents.size, _NONE, dtype=np.int64)
    rows[idents >= 0] = np.arange(int((idents >= 0).sum()))
    owner_row = np.where(owner >= 0, rows[np.maximum(owner, 0)] if rows.size else _NONE, _NONE)
    return KernelTable(Labels.of(dev.name), Labels.of(dev.kind), Labels.of(dev.device), Labels.of(launcher), dur_ns,
                       ts_ns=to_ns(np.asarray(dev.ts_us, dtype=np.float64) - origin_us).astype(np.float64),
                       stream=np.asarray(dev.tid, dtype=np.int64), correlation=correlation,
                       launch_ts_ns=launch_ts.astype(np.float64), launch_dur_ns=launch_dur.astype(np.float64),
                       bytes=np.asarray(dev.bytes, dtype=np.float64), owner=owner_row)


def _annotations(notes: list[tuple[str, bool, float, float]], origin_us: float) -> Annotations:
    ts = np.asarray([n[2] for n in notes], dtype=np.float64)
    return Annotations(Labels.of([n[0] for n in notes]), np.asarray([n[1] for n in notes], dtype=bool),
                       to_ns(ts - origin_us).astype(np.float64),
                       to_ns(np.asarray([n[3] for n in notes], dtype=np.float64)).astype(np.float64))


def read(stream: EventStream, meta: dict[str, Any] | None = None) -> Calls:
    builder = TableBuilder()
    threads = Interner()
    cpu, dev = _Cpu(), _Device()
    n_events = 0
    steps: list[tuple[float, float]] = []
    dropped = Dropped()
    notes: list[tuple[str, bool, float, float]] = []
    for chunk in stream.chunks():
        n_events += len(chunk)
        _collect(chunk, threads, builder, cpu, dev, steps, dropped, notes)

    thread = np.asarray(cpu.thread, dtype=np.int64)
    cpu_ts, dev_ts = np.asarray(cpu.ts_us, dtype=np.float64), np.asarray(dev.ts_us, dtype=np.float64)
    origin_us = earliest(np.concatenate([cpu_ts, dev_ts]))
    start = to_ns(cpu_ts - origin_us)
    end = start + to_ns(cpu.dur_us)
    parent = enclosing(thread, start, end - start, zero_first=False)
    self_ns = self_times(parent, start, end, clip=False)

    is_op = np.asarray(cpu.is_op, dtype=bool)
    owner = _link(cpu, dev, parent, is_op)
    dev_dur_ns = to_ns(dev.dur_us).astype(np.float64)
    linked = owner >= 0
    device_ns = np.bincount(owner[linked], weights=dev_dur_ns[linked], minlength=start.size)
    device_incl_ns = _inclusive(parent, owner, dev_dur_ns)
    has_device = bool(dev.dur_us)

    idents = np.asarray(cpu.ident, dtype=np.int64)
    rows = np.flatnonzero(idents >= 0)
    lone = np.flatnonzero(~linked)
    dev_start = to_ns(dev_ts[lone] - origin_us)
    pid, tid = thread_ids(threads.values(), thread[rows])
    # a call's work counted once: on the op the user called, not again on the backend ops under it
    flops = outermost(np.asarray(cpu.flops, dtype=np.float64), parent)
    moved = outermost(np.asarray(cpu.bytes, dtype=np.float64), parent)
    builder.extend(idents[rows], self_ns[rows] / 1e3, incl_us=(end - start)[rows] / 1e3,
                   device_us=device_ns[rows] / 1e3 if has_device else None, flops=flops[rows], bytes_=moved[rows],
                   device_incl_us=device_incl_ns[rows] / 1e3 if has_device else None,
                   ts_us=start[rows] / 1e3, pid=pid, tid=tid)
    if lone.size:
        builder.extend(np.asarray(dev.ident, dtype=np.int64)[lone], dev_dur_ns[lone] / 1e3,
                       device_us=dev_dur_ns[lone] / 1e3, ts_us=dev_start / 1e3,
                       pid=np.asarray(dev.pid, dtype=np.int64)[lone], tid=np.asarray(dev.tid, dtype=np.int64)[lone])
    row_parent = np.concatenate([_row_parents(parent, rows), np.full(lone.size, _NONE, dtype=np.int64)])
    info: dict[str, Any] = {"format": "kineto", "events": n_events, "device_events": len(dev.dur_us),
                            "device_unlinked": int(lone.size), "runs": len(steps) or None, "ts_origin_us": origin_us,
                            # a call's FLOPs are counted on the op the user called (outermost), whose work
                            # runs in the ops nested in it: rated over its inclusive time
                            "inclusive_flops": True}
    if dropped:
        info["dropped"] = dropped.doc()
    if steps:  # the runs are the profiler's steps: where each starts and ends, on the table's clock
        step_ts, step_dur = np.asarray(steps, dtype=np.float64).T
        step_start = to_ns(step_ts - origin_us)
        info["run_windows_ns"] = sorted(zip(step_start.tolist(), (step_start + to_ns(step_dur)).tolist(), strict=True))
    if has_device:
        names = [ident[0] for ident in builder.idents()]
        info["kernels"] = _kernel_table(dev, owner, cpu, names, dev_dur_ns, (start, end, is_op, origin_us))
    if notes:
        info["annotations"] = _annotations(notes, origin_us)
    if devices := from_skeleton(stream.skeleton):  # deviceProperties: which GPU ran it
        info["devices"] = devices
    return with_outer(builder.build({**info, **(meta or {})}), row_parent)
