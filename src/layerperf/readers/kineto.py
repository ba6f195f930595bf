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

from typing import Any

import numpy as np

from layerperf.data.calls import Annotations, Calls, Interner, KernelTable, Labels, TableBuilder, with_outer
from layerperf.data.nesting import enclosing, op_reach, outermost, past_frames, self_times
from layerperf.readers.decode import KINETO
from layerperf.readers.devices import from_skeleton
from layerperf.readers.dropped import Dropped
from layerperf.readers.kineto_collect import NONE as _NONE
from layerperf.readers.kineto_collect import Cpu, Device, Kinds, Note, collect
from layerperf.readers.stream import EventStream
from layerperf.readers.streaming import thread_keys
from layerperf.readers.tef import earliest, run_windows, thread_ids, to_ns


def nesting(thread: np.ndarray, start: np.ndarray, end: np.ndarray, is_op: np.ndarray,
            row: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each CPU event's parent and self time (ns) by a PyTorch trace's rules, whole or a segment at a time:
    ops and frames nest within 1 µs of rounding, runtime calls by their start (:func:`op_reach`), and frames
    (no ``row``) take nothing from an op's self time (:func:`past_frames`)."""
    parent = enclosing(thread, start, end - start, zero_first=False, reach=op_reach(is_op, row))
    return parent, self_times(past_frames(parent, row), start, end, clip=False)


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


def _link(cpu: Cpu, dev: Device, parent: np.ndarray, is_op: np.ndarray) -> np.ndarray:
    """For each device activity, the index of the CPU op whose device time it is (-1: none)."""
    index = np.arange(len(cpu), dtype=np.int64)
    cpu_ext = cpu.column("external")
    dev_ext = dev.column("external")
    owner = _lookup(np.where(is_op, cpu_ext, _NONE), index, dev_ext)
    # no op with that External id: through the runtime call with the same correlation id
    launch = _lookup(np.where(is_op, _NONE, cpu.column("correlation")), index,
                     dev.column("correlation"))
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


def _kernel_table(dev: Device, owner: np.ndarray, cpu: Cpu, all_idents: list[Any], dur_ns: np.ndarray,
                  times: tuple[np.ndarray, np.ndarray, np.ndarray, float], thread_keys: np.ndarray) -> KernelTable:
    """The device activities with the op each is device time of, and (``times``: the CPU events' start
    and end in ns, their parents, the origin in µs) the runtime call that launched each and its thread
    (``thread_keys``: the key of each CPU thread code)."""
    start, end, is_op, origin_us = times
    names = [ident[0] for ident in all_idents]
    idents = cpu.column("ident")
    launcher = [names[idents[o]] if o >= 0 and idents[o] >= 0 else "" for o in owner.tolist()]
    correlation = dev.column("correlation")
    launch = _lookup(np.where(is_op, _NONE, cpu.column("correlation")),
                     np.arange(start.size, dtype=np.int64), correlation)
    has = launch >= 0
    launch_ts = np.where(has, start[np.maximum(launch, 0)] if start.size else np.nan, np.nan)
    launch_dur = np.where(has, (end - start)[np.maximum(launch, 0)] if start.size else np.nan, np.nan)
    launch_thread = np.where(has, thread_keys[cpu.column("thread")[np.maximum(launch, 0)]] if start.size else _NONE,
                             _NONE)
    rows = np.full(idents.size, _NONE, dtype=np.int64)
    rows[idents >= 0] = np.arange(int((idents >= 0).sum()))
    owner_row = np.where(owner >= 0, rows[np.maximum(owner, 0)] if rows.size else _NONE, _NONE)
    dev_idents = [all_idents[i] for i in dev.column("ident").tolist()]
    name, kind, device = (Labels.of([ident[k] for ident in dev_idents]) for k in range(3))
    return KernelTable(name, kind, device, Labels.of(launcher), dur_ns,
                       ts_ns=to_ns(dev.column("ts_us") - origin_us).astype(np.float64),
                       stream=dev.column("tid"), correlation=correlation,
                       launch_ts_ns=launch_ts.astype(np.float64), launch_dur_ns=launch_dur.astype(np.float64),
                       bytes=dev.column("bytes"), owner=owner_row, launch_thread=launch_thread.astype(np.int64))


def annotation_table(notes: list[Note], origin_us: float) -> Annotations:
    ts = np.asarray([n[2] for n in notes], dtype=np.float64)
    return Annotations(Labels.of([n[0] for n in notes]), np.asarray([n[1] for n in notes], dtype=bool),
                       to_ns(ts - origin_us).astype(np.float64),
                       to_ns(np.asarray([n[3] for n in notes], dtype=np.float64)).astype(np.float64),
                       np.asarray([n[4] for n in notes], dtype=np.int64))


def read(stream: EventStream, meta: dict[str, Any] | None = None) -> Calls:
    builder = TableBuilder()
    threads = Interner()
    cpu, dev, kinds = Cpu(), Device(), Kinds()
    n_events = 0
    steps: list[tuple[float, float]] = []
    dropped = Dropped()
    notes: list[Note] = []
    stream.decode_as(KINETO)
    for chunk in stream.chunks():
        n_events += len(chunk)
        collect(chunk, kinds, threads, builder, cpu, dev, steps, dropped, notes)

    thread = cpu.column("thread")
    cpu_ts, dev_ts = cpu.column("ts_us"), dev.column("ts_us")
    origin_us = earliest(np.concatenate([cpu_ts, dev_ts]))
    start = to_ns(cpu_ts - origin_us)
    end = start + to_ns(cpu.column("dur_us"))
    idents, is_op = cpu.column("ident"), cpu.column("is_op")
    parent, self_ns = nesting(thread, start, end, is_op, idents >= 0)

    owner = _link(cpu, dev, parent, is_op)
    dev_dur_ns = to_ns(dev.column("dur_us")).astype(np.float64)
    linked = owner >= 0
    device_ns = np.bincount(owner[linked], weights=dev_dur_ns[linked], minlength=start.size)
    device_incl_ns = _inclusive(parent, owner, dev_dur_ns)
    has_device = bool(len(dev))

    rows = np.flatnonzero(idents >= 0)
    lone = np.flatnonzero(~linked)
    dev_start = to_ns(dev_ts[lone] - origin_us)
    pid, tid = thread_ids(threads.values(), thread[rows])
    # a call's work counted once: on the op the user called, not again on the backend ops under it
    flops = outermost(cpu.column("flops"), parent)
    moved = outermost(cpu.column("bytes"), parent)
    builder.extend(idents[rows], self_ns[rows] / 1e3, incl_us=(end - start)[rows] / 1e3,
                   device_us=device_ns[rows] / 1e3 if has_device else None, flops=flops[rows], bytes_=moved[rows],
                   device_incl_us=device_incl_ns[rows] / 1e3 if has_device else None,
                   ts_us=start[rows] / 1e3, pid=pid, tid=tid)
    if lone.size:
        # ran on the device alone: no CPU self time (the trace's CPU total stays the CPU's), its span inclusive
        builder.extend(dev.column("ident")[lone], np.zeros(lone.size), incl_us=dev_dur_ns[lone] / 1e3,
                       device_us=dev_dur_ns[lone] / 1e3, ts_us=dev_start / 1e3,
                       pid=dev.column("pid")[lone], tid=dev.column("tid")[lone])
    row_parent = np.concatenate([_row_parents(parent, rows), np.full(lone.size, _NONE, dtype=np.int64)])
    info: dict[str, Any] = {"format": "kineto", "events": n_events, "device_events": len(dev),
                            "device_unlinked": int(lone.size), "runs": len(steps) or None, "ts_origin_us": origin_us,
                            # a call's FLOPs are counted on the op the user called (outermost), whose work
                            # runs in the ops nested in it: rated over its inclusive time
                            "inclusive_flops": True}
    if dropped:
        info["dropped"] = dropped.doc()
    if steps:  # the runs are the profiler's steps: where each starts and ends, on the table's clock
        info["run_windows_ns"] = run_windows(steps, origin_us)
    if has_device:
        info["kernels"] = _kernel_table(dev, owner, cpu, builder.idents(), dev_dur_ns, (start, end, is_op, origin_us),
                                        thread_keys(threads, []))
    if notes:
        info["annotations"] = annotation_table(notes, origin_us)
    if devices := from_skeleton(stream.skeleton):  # deviceProperties: which GPU ran it
        info["devices"] = devices
    return with_outer(builder.build({**info, **(meta or {})}), row_parent)
