"""The views of ``layerperf analyze --view``: a PyTorch trace's GPU timeline, one table (or two) each.

Each view is one module of :mod:`layerperf.analysis.gpu` rendered: rows with the figures in the units
their keys say (ns as µs, shares as fractions), columns for people. The JSON document is an object:
``view``, ``source``, ``device`` (false for a trace without device activity: then no rows), the
view's rows under their own keys (below), and ``dropped`` (events the reader left out, by reason).
The CSV header is the view's keys (:data:`KEYS`), rows or none.
"""

from __future__ import annotations

from dataclasses import asdict, fields, replace
from typing import Any

from layerperf.analysis.gpu import VIEWS, source
from layerperf.analysis.gpu.annotations import AnnotationTime, annotation_times
from layerperf.analysis.gpu.idle import KERNEL_WAIT_NS, Gaps, idle
from layerperf.analysis.gpu.kernel_type import KindTime, kernel_types
from layerperf.analysis.gpu.launch import LaunchStats, launch
from layerperf.analysis.gpu.memcpy import Direction, memcpy
from layerperf.analysis.gpu.overlap import overlap
from layerperf.analysis.gpu.queue import MAX_QUEUE, QueueStats, queues
from layerperf.analysis.gpu.temporal import temporal
from layerperf.data.calls import Annotations, Calls, KernelTable
from layerperf.errors import InputError
from layerperf.readers.dropped import warnings
from layerperf.renderers.view import KEEP, Column, Section, View, notes
from layerperf.renderers.views.columns import NAME_MIN, name_column, text
from layerperf.util import units


def _us(key: str, header: str) -> Column:
    return Column(key, header, units.duration_us)


def _pct(key: str, header: str) -> Column:
    return Column(key, header, units.percent)


def _keys(cls: type) -> tuple[str, ...]:
    """The keys of :func:`_rows` of a dataclass's items."""
    return tuple(f.name[:-3] + "_us" if f.name.endswith("_ns") else f.name for f in fields(cls))


# each view's row keys, in order: its CSV header whether or not it has rows
KEYS: dict[str, tuple[str, ...]] = {
    "temporal": ("label", "span_us", "idle_us", "compute_us", "non_compute_us", "idle_share", "compute_share",
                 "non_compute_share", "activities"),
    "idle": _keys(Gaps), "kernel-type": _keys(KindTime), "launch": _keys(LaunchStats), "queue": _keys(QueueStats),
    "memcpy": _keys(Direction), "overlap": ("compute_us", "communication_us", "overlap_us", "overlap_share"),
    "annotations": _keys(AnnotationTime),
}


def _rows(items: Any, ns_keys: tuple[str, ...] = ()) -> list[dict[str, Any]]:
    """Dataclass rows as dicts, ``*_ns`` figures as ``*_us``."""
    out = []
    for item in items:
        row = {}
        for key, value in asdict(item).items():
            if key.endswith("_ns"):
                row[key[:-3] + "_us"] = None if value is None else value / 1e3
            else:
                row[key] = list(value) if isinstance(value, tuple) else value
        out.append(row)
    return out


def _temporal(k: KernelTable, table: Calls) -> tuple[list[Section], dict[str, Any]]:
    windows = table.meta.get("run_windows_ns") or []
    notes_ = table.meta.get("annotations")
    steps = sorted((t, n) for n, t, g in zip(notes_.name.tolist(), notes_.ts_ns.tolist(), notes_.gpu.tolist(),
                                             strict=True) if n.startswith("ProfilerStep#") and not g) \
        if isinstance(notes_, Annotations) else []
    result = temporal(k, windows, [n for _, n in steps] if len(steps) == len(windows) else ())
    rows = []
    for b in (result.whole, *result.steps):
        rows.append({"label": b.label, "span_us": b.span_ns / 1e3, "idle_us": b.idle_ns / 1e3,
                     "compute_us": b.compute_ns / 1e3, "non_compute_us": b.non_compute_ns / 1e3,
                     "idle_share": b.share(b.idle_ns), "compute_share": b.share(b.compute_ns),
                     "non_compute_share": b.share(b.non_compute_ns), "activities": b.activities})
    cols = [name_column("label", "span"), _us("span_us", "span"), _us("idle_us", "idle"), _pct("idle_share", "idle %"),
            _us("compute_us", "compute"), _pct("compute_share", "compute %"), _us("non_compute_us", "non-compute"),
            _pct("non_compute_share", "non-compute %"), Column("activities", "activities")]
    lines = ["span = first device activity's start to last one's end; idle = no activity on any stream; compute = "
             "computation kernels; non-compute = copies, sets, communication, other"]
    if result.steps:
        lines.append("per ProfilerStep: the activities its CPU side launched")
    return [Section(cols, rows, "Temporal breakdown", notes(lines), KEYS["temporal"])], {"rows": rows}


def _idle(k: KernelTable, _: Calls) -> tuple[list[Section], dict[str, Any]]:
    rows = _rows(idle(k))
    cols = [text("device", "device", priority=KEEP), Column("stream", "stream", priority=KEEP),
            text("cause", "cause", priority=KEEP),
            _us("idle_us", "idle"), _pct("share", "of idle"),
            Column("gaps", "gaps"), _us("min_us", "min gap"), _us("median_us", "median gap"),
            _us("mean_us", "mean gap"), _us("max_us", "max gap")]
    lines = ["host wait: the next activity's runtime call started after the gap began; kernel wait: otherwise, "
             f"a gap under {units.duration_us(KERNEL_WAIT_NS / 1e3)}; other: the rest"]
    return [Section(cols, rows, "Idle time between activities, per stream", notes(lines), KEYS["idle"])], \
        {"rows": rows}


def _kernel_type(k: KernelTable, _: Calls) -> tuple[list[Section], dict[str, Any]]:
    rows = _rows(kernel_types(k))
    cols = [name_column("kind", "kind"), Column("calls", "calls"), _us("total_us", "device time"),
            _pct("share", "share"),
            _us("mean_us", "mean"), _us("min_us", "min"), _us("max_us", "max"), _us("stddev_us", "stddev")]
    lines = ["communication: ^nccl.*Kernel; memory: ^Memcpy, ^Memset, ^dma; other: names holding Sync or Memcpy; "
             "computation: the rest (Holistic Trace Analysis's rules); per kernel: --aggregate-by kernel"]
    return [Section(cols, rows, "Device time by kind", notes(lines), KEYS["kernel-type"])], {"rows": rows}


def _launch(k: KernelTable, _: Calls) -> tuple[list[Section], dict[str, Any]]:
    result = launch(k)
    rows = _rows(result.kernels)
    seqs = [{"op": s.op, "calls": s.calls, "kernels": len(s.sequence), "sequence": " -> ".join(s.sequence)}
            for s in result.sequences]
    # ranked by total delay: that column is kept; each delay header says "delay" when its neighbours are left out
    cols = [name_column("name", "kernel"), Column("launches", "launches"),
            Column("cpu_mean_us", "CPU launch mean", units.duration_us, priority=3),
            Column("delay_total_us", "delay total", units.duration_us, priority=KEEP),
            _us("delay_mean_us", "delay mean"), _us("delay_median_us", "delay median"),
            _us("delay_max_us", "delay max")]
    seq_cols = [name_column("op", "op"), Column("calls", "calls"), Column("kernels", "kernels"),
                text("sequence", "kernel sequence", priority=KEEP, min_width=NAME_MIN)]
    lines = [f"{result.launches} launches: {units.duration_us(result.cpu_ns / 1e3)} of CPU launch time, "
             f"{units.duration_us(result.delay_ns / 1e3)} of launch delay (runtime call's end to the activity's "
             "start, 0 when it started before the call returned)"]
    return ([Section(cols, rows, "Kernel launches, by total launch delay", notes(lines), KEYS["launch"]),
             Section(seq_cols, seqs, "Kernel sequence of each op's calls", ())],
            {"rows": rows, "sequences": [{**s, "sequence": list(q.sequence)} for s, q in
                                         zip(seqs, result.sequences, strict=True)]})


def _queue(k: KernelTable, _: Calls) -> tuple[list[Section], dict[str, Any]]:
    rows = _rows(queues(k))
    cols = [text("device", "device", priority=KEEP), Column("stream", "stream", priority=KEEP),
            Column("changes", "changes"), Column("min_length", "min"),
            Column("max_length", "max"), Column("mean_length", "mean", lambda v: f"{v:.2f}"),
            Column("time_mean_length", "time-weighted mean", lambda v: f"{v:.2f}"),
            _us("full_us", f"time at >= {MAX_QUEUE}")]
    lines = ["queue length: +1 when a runtime call launches an activity, -1 when the activity starts; a CPU thread "
             f"finding {MAX_QUEUE} queued blocks until one starts"]
    return [Section(cols, rows, "Launch queue per stream", notes(lines), KEYS["queue"])], {"rows": rows}


def _memcpy(k: KernelTable, _: Calls) -> tuple[list[Section], dict[str, Any]]:
    result = memcpy(k)
    rows = _rows(result.directions)
    cols = [name_column("direction", "direction"), Column("calls", "calls"), Column("bytes", "bytes", units.binary),
            _us("total_us", "time"), Column("bandwidth_bytes_per_s", "bandwidth", _rate),
            Column("peak_bytes_per_s", "peak (concurrent)", _rate)]
    series = [{"start_us": s / 1e3, **{d: v[i] for d, v in result.bucket_bytes_per_s.items()}}
              for i, s in enumerate(result.bucket_start_ns)]
    series_cols = [Column("start_us", "from", units.duration_us, priority=KEEP),
                   *[Column(d, d, _rate) for d in result.bucket_bytes_per_s]]
    lines = [f"over time: the span in {len(series)} buckets of {units.duration_us(result.bucket_ns / 1e3)}, bytes "
             "moved in each over its length"] if rows else ["no copies or sets in this trace"]
    sections = [Section(cols, rows, "Copies and sets by direction", notes(lines), KEYS["memcpy"])]
    if result.bucket_bytes_per_s:
        sections.append(Section(series_cols, series, "Bandwidth over time", ()))
    return sections, {"rows": rows, "over_time": series}


def _rate(v: float) -> str:
    return units.binary(v) + "/s"


def _overlap(k: KernelTable, _: Calls) -> tuple[list[Section], dict[str, Any]]:
    o = overlap(k)
    rows = [{"compute_us": o.compute_ns / 1e3, "communication_us": o.communication_ns / 1e3,
             "overlap_us": o.overlap_ns / 1e3, "overlap_share": o.share}]
    cols = [_us("compute_us", "compute"), _us("communication_us", "communication"), _us("overlap_us", "overlap"),
            _pct("overlap_share", "of communication")]
    lines = ["no communication kernels (^nccl.*Kernel) in this trace"] if not o.communication_ns else []
    return [Section(cols, rows, "Compute/communication overlap", notes(lines), KEYS["overlap"])], {"rows": rows}


def _annotations(k: KernelTable | None, table: Calls) -> tuple[list[Section], dict[str, Any]]:
    a = table.meta.get("annotations")
    rows = _rows(annotation_times(a, k)) if isinstance(a, Annotations) else []
    cols = [name_column("name", "annotation"), Column("cpu_calls", "CPU ranges"), _us("cpu_us", "CPU time"),
            Column("gpu_calls", "GPU ranges"), _us("gpu_us", "GPU time"),
            _us("launched_device_us", "device time launched inside")]
    lines = [] if rows else ["no user annotations in this trace"]
    return [Section(cols, rows, "User annotations", notes(lines), KEYS["annotations"])], {"rows": rows}


BUILDERS = {"temporal": _temporal, "idle": _idle, "kernel-type": _kernel_type, "launch": _launch,
            "queue": _queue, "memcpy": _memcpy, "overlap": _overlap, "annotations": _annotations}


def gpu_view(table: Calls, view: str, top: int = 0) -> View:
    """``view`` (one of :data:`~layerperf.analysis.gpu.VIEWS`) of ``table``'s device activity; a trace
    without any says so (no rows, JSON ``"device": false``)."""
    if view not in VIEWS:
        raise InputError(f"unknown --view {view!r}", hint=f"use one of: {', '.join(VIEWS)}")
    meta = table.meta
    kernels = source.of(meta)
    title = f"{meta.get('source')} ({meta.get('format')}): {view}"
    doc: dict[str, Any] = {"view": view, "source": meta.get("source"), "device": kernels is not None}
    left_out = notes(warnings(meta), "warning")
    if kernels is None and view != "annotations":
        line = f"no device: this {meta.get('format')} trace records no GPU activity, so it has no {view} view"
        doc["rows"] = []
        doc["dropped"] = meta.get("dropped") or {}
        return View((Section([], [], None, (*notes([title, line]), *left_out), KEYS[view]),), doc)
    sections, figures = BUILDERS[view](kernels, table)  # type: ignore[arg-type]
    if top:
        sections = [replace(s, rows=list(s.rows)[:top]) for s in sections]
    first = sections[0]
    sections[0] = replace(first, title=f"{title}: {first.title}", notes=(*first.notes, *left_out))
    doc.update(figures)
    doc["dropped"] = meta.get("dropped") or {}
    return View(tuple(sections), doc)
