"""The summary's headline figures: what ran where, how long, how much work, counters and outliers.

A foreign trace's figures per run are the median over its steady runs: a warm-up run (far slower than
the rest, :mod:`.runs`) is left out and named, never averaged in; the whole trace's total stands beside.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from layerperf.analysis.summary import summary, work_line
from layerperf.calibration.device_peaks import TraceDevice
from layerperf.data.fold import called_names
from layerperf.data.metadata import Metadata
from layerperf.data.sketch import ALPHA, EXACT_MAX
from layerperf.renderers.html import counters
from layerperf.renderers.html.page import facts_html as dl
from layerperf.renderers.html.page import notes_html
from layerperf.renderers.html.runs import FAR, RunSet
from layerperf.renderers.html.source import Source
from layerperf.renderers.html.table import far_calls
from layerperf.renderers.views.profile import _backend_options
from layerperf.renderers.views.profile import _threads as threads_line
from layerperf.util import units


def _machine(meta: Metadata) -> str:
    m = meta.machine
    if m is None:
        return "?"
    mem = f", {units.binary(m.memory_bytes)}" if m.memory_bytes else ""
    return f"{m.cpu or '?'}, {m.cores or '?'} cores{mem}; {m.os or ''} {m.arch or ''}".strip()


def _ms(ns: float) -> str:
    return units.duration_us(ns / 1e3)


def runs_line(runs: RunSet | None, said: str) -> str:
    """How many runs, how found, the warm-up left apart and the outliers named."""
    if runs is None:
        return said
    durations = runs.durations_ns
    line = f"{len(runs)} {runs.noun}s ({runs.how})" if len(runs) != 1 else f"1 ({runs.how})"
    if runs.warmup:
        first = ", ".join(_ms(float(d)) for d in durations[:runs.warmup])
        line += (f"; {runs.noun}s 1–{runs.warmup} ({first}) were a warm-up, x{float(durations[0]) / runs.median_ns:.1f}"
                 f" the median of the others ({_ms(runs.median_ns)}): left out of per-{runs.noun} figures"
                 if runs.warmup > 1 else
                 f"; {runs.noun} 1 ({first}) was a warm-up, x{float(durations[0]) / runs.median_ns:.1f} the median of "
                 f"the others ({_ms(runs.median_ns)}): left out of per-{runs.noun} figures")
    if runs.outliers:
        line += f"; outliers (x{FAR:g} the median or more, or 1/{FAR:g} or less): " + ", ".join(
            f"{runs.noun} {k + 1} ({_ms(float(durations[k]))})" for k in runs.outliers)
    return line


def _per_run(runs: RunSet | None, sums: Callable[[int], float], fmt: Callable[[float], str], whole: float) -> str:
    """A figure per run (``sums(k)``: run k's sum): the median over the steady runs, the range, the whole
    trace's beside."""
    if runs is None or len(runs) < 2 or not runs.split:
        n = len(runs) if runs is not None else "?"
        return f"{fmt(whole)} (the whole trace: {n} run{'' if n == 1 else 's'})"
    steady = [sums(k) for k in runs.steady]
    noun = runs.noun
    warm = f", {runs.warmup} warm-up {noun}{'s' if runs.warmup > 1 else ''} left out" if runs.warmup else ""
    spread = f"; {fmt(min(steady))}–{fmt(max(steady))}" if len(steady) > 1 else ""
    return (f"{fmt(float(np.median(steady)))} per {noun} (median of {len(steady)} steady {noun}s{warm}{spread}); "
            f"{fmt(whole)} over the whole trace")


def profile_facts(src: Source, runs: RunSet | None) -> list[tuple[str, str]]:
    prof = src.profile
    assert prof is not None
    s = summary(prof)
    meta = prof.metadata
    overhead = s.get("profiler_overhead")
    out = [
        ("model", meta.model.name),
        ("backend", f"{meta.backend} {meta.backend_version} ({meta.provider}); {_backend_options(meta)}"),
        ("machine", _machine(meta)),
        ("runs", f"{s['runs']} measured; {threads_line(prof, s)}"),
        ("latency (profiler off)", f"median {units.duration_us(s['latency_median_us'])}, "
                                   f"p90 {units.duration_us(s['latency_p90_us'])}"),
        ("profiled run", f"median {units.duration_us(s['profiled_median_us'] or s['run_median_us'])}"
         + (f"; {len(runs.outliers)} outlier runs" if runs is not None and runs.outliers else "")),
        ("profiler overhead", f"x{overhead:.3f}" if overhead else "?"),
        ("layers", f"{s['layers']}; sum of medians {units.duration_us(s['layers_sum_median_us'])}"),
        ("work per run", work_line(s)),
    ]
    if prof.counters is not None:
        out.append(("perf counters", ", ".join(prof.counters.events) or "?"))
        out += counters.summary_facts(prof, s.get("layers_sum_median_us"))
    if prof.memory is not None:
        out.append(("memory", f"live peak {units.binary(prof.memory.peak_bytes)}, max allocated "
                              f"{units.binary(prof.memory.max_allocated_bytes)}"))
    return out


@dataclass(frozen=True, slots=True)
class _Sums:
    """Per run and over the whole trace, the sum of a figure (unknown counted as 0)."""

    per_run: Callable[[int], float]
    whole: float


def _sums(src: Source, runs: RunSet | None, figure: str) -> _Sums:
    if src.digest is not None:
        per = src.digest.per_run[figure]
        return _Sums(lambda k: float(per[k]), float(src.digest.whole[figure]))
    values = np.nan_to_num(np.asarray(getattr(src.calls, figure), dtype=np.float64), nan=0.0)
    return _Sums(lambda k: float(values[runs.rows[k]].sum()) if runs is not None else 0.0, float(values.sum()))


def trace_facts(src: Source, runs: RunSet | None, device: TraceDevice | None) -> list[tuple[str, str]]:
    table, meta = src.table, src.table.meta
    said = f"{meta.get('runs')} (as the trace says)" if meta.get("runs") else "? (not in this trace)"
    n_calls = src.digest.calls if src.digest is not None else len(src.calls)
    ops = len(called_names(table))
    out = [
        ("trace", str(meta.get("source") or src.label)),
        ("format", src.format),
        ("events", f"{meta.get('events', '?')} events, {n_calls} op calls, {ops} ops"),
        ("runs", runs_line(runs, said)),
    ]
    if runs is not None and len(runs) > 1:
        out.append((f"{runs.noun} duration", f"median {_ms(runs.median_ns)} over the steady {runs.noun}s"
                                             + (f" ({runs.warmup} warm-up left out)" if runs.warmup else "")))
    per_run = {f: _sums(src, runs, f) for f in ("dur_ns", "device_ns", "flops")}
    durations = per_run["dur_ns"]
    out.append(("total self time", _per_run(runs, durations.per_run, lambda v: units.duration_us(v / 1e3),
                                            durations.whole)))
    if table.has_device:
        device_ns = per_run["device_ns"]
        out.append(("device time", _per_run(runs, device_ns.per_run, lambda v: units.duration_us(v / 1e3),
                                            device_ns.whole)))
    known = src.digest.flops_known if src.digest is not None else int(np.isfinite(src.calls.flops).sum())
    flops = (_per_run(runs, per_run["flops"].per_run, lambda v: units.si(v, "FLOP"), per_run["flops"].whole)
             + f"; counted on the {known} of {n_calls} op calls whose FLOPs are known") if known else \
        "? (not in this trace)"
    out += [("FLOPs", flops), ("latency", "? (not in this trace)")]
    out.append(("machine", device.label() if device is not None else "? (not in this trace)"))
    return out


def facts_html(src: Source, runs: RunSet | None, device: TraceDevice | None) -> str:
    """The headline figures as a definition list, and the calls far from their median counted."""
    rows = profile_facts(src, runs) if src.profile is not None else trace_facts(src, runs, device)
    far, n = (src.digest.far, src.digest.calls) if src.digest is not None else (far_calls(src.calls), len(src.calls))
    sketched = (f"; medians within {ALPHA:.1%} for ops of over {EXACT_MAX} calls (the trace was read as a stream)"
                if src.digest is not None else "")
    rows.append(("calls far from their median", f"{far} of {n} took x{FAR:g} their op's median or more "
                                                 f"(marked red in the timeline; the table's max / median{sketched})"))
    return dl(rows)


def warnings_html(warnings: Sequence[str]) -> str:
    none = "" if warnings else "<p>none</p>"
    return "<h3>warnings</h3>" + notes_html(warnings, "warnings", "notes warnings") + none
