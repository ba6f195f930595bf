"""The view of bench results: one row per measurement, then the details (of a single one) and warnings."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from layerperf.bench.measure import SLOW_FACTOR
from layerperf.bench.result import BenchResult
from layerperf.renderers.view import KEEP, Column, Note, Section, View, notes
from layerperf.renderers.views.columns import LAYER_COLUMNS, counter_columns, text, with_int_columns
from layerperf.util import units


def _as(key: str, header: str, priority: int) -> Column:
    """The profile table's column for ``key`` (same formatting), under bench's header."""
    return dataclasses.replace(next(c for c in LAYER_COLUMNS if c.key == key), header=header, priority=priority)


# A narrow terminal keeps the median (what a row measured), then the spread, then the work and rates.
FIGURE_COLUMNS: tuple[Column, ...] = (
    _as("median_us", "median", KEEP),
    Column("min_us", "min", units.duration_us, priority=2),
    Column("mean_us", "mean", units.duration_us, priority=3),
    Column("p90_us", "p90", units.duration_us, priority=2),
    Column("stddev_us", "stddev", units.duration_us, priority=3),
    Column("cv", "CV", units.percent, priority=1),
    Column("outliers", "outliers", priority=4),
    _as("flops", "FLOPs", 3),
    _as("flops_per_s", "FLOP/s", 2),
    _as("bytes", "bytes", 4),
    _as("bytes_per_s", "bytes/s", 3),
    Column("peak_rss_delta_bytes", "peak mem", units.binary, priority=4),
)


def _shown(r: BenchResult, swept: Sequence[str]) -> dict[str, Any]:
    row = r.row()
    for name in swept:
        t = next((i for i in r.inputs if i is not None and i.name == name), None)
        row[f"in:{name}"] = t.shape_str() if t is not None else "?"
    return row


def _columns(results: Sequence[BenchResult], swept: Sequence[str]) -> list[Column]:
    cols: list[Column] = [text(f"in:{n}", n, priority=KEEP) for n in swept]  # which row is which
    if not swept and len({r.in_shapes for r in results}) > 1:
        cols.append(text("in_shapes", "in_shapes", priority=KEEP, min_width=24))
    if len(results) > 1:
        cols.append(Column("threads", "threads", priority=KEEP))
    cols += FIGURE_COLUMNS
    if any(r.cost.int_ops for r in results):  # integer work only where there is some
        cols = with_int_columns(cols)
    labels = list(dict.fromkeys(k for r in results for k in r.counters))
    cols += counter_columns([f"{k}_per_call" for k in labels])
    return cols


def _tensor(t: Any, weights: Sequence[str]) -> str:
    if t is None:
        return "-"
    return f"{t.name} {t.shape_str()} {t.dtype}" + (" (initializer)" if t.name in weights else "")


def _set_aside(r: BenchResult) -> str:
    t = r.timing
    aside = [f"{len(t.disturbed_ns)} disturbed (a thread waited for a CPU)" if t.disturbed_ns and not t.used_disturbed
             else "", f"{t.slowed} slowed (the CPU ran slowed)" if t.slowed and not t.slowed_used else ""]
    return f"; set aside: {', '.join(a for a in aside if a)}" if any(aside) else ""


def _yardstick(r: BenchResult) -> list[str]:
    if not r.yardstick_us:
        return []
    t = r.timing
    p10, med, p90 = r.yardstick_us
    held = (f"; full speed {t.speed_reference_ns / 1e3:.1f} µs, samples beside a reading above "
            f"{SLOW_FACTOR * t.speed_reference_ns / 1e3:.1f} µs set aside" if t.speed_reference_ns
            else "; runs at different yardsticks ran at different CPU speeds")
    return [f"CPU speed yardstick: a fixed loop took {med:.1f} µs (p10 {p10:.1f}, p90 {p90:.1f}) "
            f"between the samples{held}"]


def detail_lines(r: BenchResult) -> list[str]:
    """What was measured and how, in a few lines."""
    t = r.timing
    st = r.stats
    ins = ", ".join(_tensor(i, r.weights) for i in r.inputs)
    outs = ", ".join(_tensor(o, ()) for o in r.outputs)
    attrs = " ".join(f"{k}={v}" for k, v in r.attrs.items())
    kernels = ", ".join(f"{k.op_type} ({k.provider.removesuffix('ExecutionProvider')})" for k in r.kernels)
    lines = [
        f"{r.label}: {ins} -> {outs}" + (f"; {attrs}" if attrs else ""),
        f"ran {kernels}; opt level {r.opt_level}, threads {r.threads or 'default'}",
        f"{st.n} samples of {t.loops} call{'s' if t.loops > 1 else ''} after {t.warmup_batches} warm-up batches "
        f"({'settled' if t.warmup_settled else 'not settled'}, {t.warmup_s:.2f} s){_set_aside(r)}",
        f"IQR outliers: {st.outliers_low} low, {st.outliers_high} high; Q1 {units.duration_us(st.q1_us)}, "
        f"Q3 {units.duration_us(st.q3_us)}",
    ]
    if r.overhead_us is not None:
        lines.append(f"empty run (Identity, same settings): {units.duration_us(r.overhead_us)} per call, "
                     "included in the times above, not subtracted")
    lines.append(f"peak memory: {units.binary(r.peak_rss_delta_bytes)} above the resident size before the run "
                 f"({r.memory_source})")
    return lines + _yardstick(r)


def _warnings(results: Sequence[BenchResult]) -> list[Note]:
    many = len(results) > 1
    return [Note(f"row {i + 1}: {w}" if many else w, "warning") for i, r in enumerate(results) for w in r.warnings]


def bench_view(results: Sequence[BenchResult], *, swept: Sequence[str] = (), many: bool | None = None) -> View:
    """``results`` as one table (the ``swept`` inputs' shapes first); JSON holds everything, an array
    when ``many`` (several results, or a sweep or thread list that might give several), else one object.
    CSV holds every figure of :meth:`BenchResult.row`, every digit."""
    many = len(results) > 1 if many is None else many
    rows = [r.row() for r in results]
    title = results[0].label if len({r.label for r in results}) == 1 else "bench"
    lines = notes(detail_lines(results[0])) if len(results) == 1 else ()
    section = Section(columns=_columns(results, swept), rows=rows, shown=[_shown(r, swept) for r in results],
                      title=title, notes=(*lines, *_warnings(results)))
    doc: Any = [r.to_json() for r in results] if many else results[0].to_json()
    return View(sections=(section,), doc=doc)
