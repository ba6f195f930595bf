"""The view of a Profile: its layer table, ranked, and the summary lines below it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from layerperf.analysis.summary import summary, work_line
from layerperf.calibration.peaks import Peaks
from layerperf.data import fidelity
from layerperf.data.metadata import Metadata
from layerperf.data.profile import Layer, Profile
from layerperf.data.table import COLUMNS, extra_columns
from layerperf.renderers.view import Column, Note, Row, Section, View, for_people, notes
from layerperf.renderers.views import peak
from layerperf.renderers.views.columns import counter_columns, header, layer_columns
from layerperf.util import units

if TYPE_CHECKING:
    pass

# The profile table's order: self % is each layer's share of all measured layer time (calls x mean),
# the figure the cumulative column runs over; self time is the median per call, so its column need not
# be monotonic. The title names the column the rows are ranked by.
RANK_KEY = "share"
DEFAULT_TOP = 20  # rows people see when --top is not given
INCLUSIVE = Column("incl_median_us", "inclusive", units.duration_us)


def ranked(rows: list[dict[str, Any]], top: int | None) -> list[dict[str, Any]]:
    """Rows by :data:`RANK_KEY`, largest first (ties keep execution order; unknown last); the first ``top``
    of them (all when ``top`` is None or 0)."""
    out = sorted(rows, key=lambda r: (r[RANK_KEY] is None, -(r[RANK_KEY] or 0.0)))
    return out[:top] if top else out


def profile_title(prof: Profile, shown: int, total: int) -> str:
    return (f"{prof.metadata.model.name}: top {shown} of {total} layers by {header(RANK_KEY)} (share of all "
            "measured layer time)")


def marked_shapes(rows: Sequence[Row], layers: Sequence[Layer]) -> list[Row]:
    """Rows whose shapes show padded dims as ``stored(real)``, e.g. ``1x24(20)x16x16``: for people only,
    the rows' own ``in_shapes``/``out_shapes`` keep the plain stored dims."""
    by_name = {layer.name: layer for layer in layers}
    out = []
    for row in rows:
        layer = by_name.get(str(row.get("name")))
        if layer is not None and layer.padded:
            row = {**row, "in_shapes": ";".join(t.marked_shape_str() for t in layer.inputs),
                   "out_shapes": ";".join(t.marked_shape_str() for t in layer.outputs)}
        out.append(row)
    return out


OUTLIER_RATIO = 3.0  # a layer whose mean per call is this many times its median rests on a few slow calls
OUTLIER_MARK = " *"


def marked_outliers(rows: Sequence[Row]) -> tuple[list[Row], list[Row]]:
    """Rows whose self % (calls x mean) rests on outlier calls, their self % shown with
    :data:`OUTLIER_MARK`: the mean per call above :data:`OUTLIER_RATIO` times the median (one call preempted
    on a busy host, a first call's setup). The rows as shown, and those marked."""
    out: list[Row] = []
    marked: list[Row] = []
    for row in rows:
        mean, median, share = row.get("mean_us"), row.get("median_us"), row.get(RANK_KEY)
        if share is not None and mean is not None and median and mean > OUTLIER_RATIO * median:
            row = {**row, RANK_KEY: units.percent(share) + OUTLIER_MARK}
            marked.append(row)
        out.append(row)
    return out, marked


def outlier_note(marked: Sequence[Row]) -> list[Note]:
    """The legend of :data:`OUTLIER_MARK`, with the figures of the most inflated row."""
    if not marked:
        return []
    top = max(marked, key=lambda r: float(r["mean_us"]) / float(r["median_us"]))
    return [Note(f"{OUTLIER_MARK.strip()} = self % rests on outlier calls ({len(marked)} of the rows shown): the mean "
                 f"per call is over {OUTLIER_RATIO:g}x the median, so ranked by median these rows would sit lower "
                 f"(e.g. {top.get('name')}: median {units.duration_us(top['median_us'])}, mean "
                 f"{units.duration_us(top['mean_us'])}, max {units.duration_us(top.get('max_us'))}); "
                 "more --runs on a quieter host settle it", "warning")]


def layers_section(prof: Profile, rows: Sequence[Row] | None = None) -> Section:
    """The layers as programs read them (layers.csv): the columns of :data:`layerperf.data.table.COLUMNS`,
    then counters and metrics; every layer in execution order unless ``rows`` says which."""
    keys = list(COLUMNS) + extra_columns(prof)
    return Section(columns=(), rows=prof.table() if rows is None else rows, keys=keys)


def _columns(prof: Profile, summ: Mapping[str, Any], calibrated: bool) -> list[Column]:
    int_ops = summ["int_ops"] or 0
    columns = layer_columns(int_ops > 0, mostly_int=int_ops > (summ["flops"] or 0))
    if calibrated:  # % of peak, once this machine is calibrated
        columns = peak.with_column(columns)
    columns += counter_columns(extra_columns(prof), prof.counters.events if prof.counters is not None else None)
    if prof.parent_names:  # control flow: a parent's whole duration beside its self time
        columns.insert(3, INCLUSIVE)
    return columns


def run_threads(prof: Profile, summ: Mapping[str, Any]) -> int | None:
    """The intra-op threads the run used (counted), else asked for; None when neither is known."""
    used = summ.get("intra_op_threads") or prof.metadata.threads
    return int(used) if isinstance(used, int | float) and used > 0 else None


def wrote_lines(written: Mapping[str, Path]) -> list[str]:
    """A view's status lines for the files a command wrote (:attr:`~layerperf.renderers.view.View.status`)."""
    return [f"wrote {path}" for path in written.values()]


def profile_view(prof: Profile, *, top: int | None, fmt: str, written: Mapping[str, Path],
                 peaks: Peaks | None | str = peak.AUTO) -> View:
    """The layer table and the summary lines. For people the ``top`` layers by self % (20 when None);
    for programs every layer in execution order (the ``top`` ranked ones when ``top`` is given).
    ``peaks``: what "% of peak" divides by (default: the calibration of the machine the profile ran on,
    when there is one; None: no such column)."""

    summ = summary(prof)
    machine = prof.metadata.machine
    ref, peak_notes = peak.reference(machine.to_json() if machine else None, run_threads(prof, summ), peaks)
    table = peak.with_pcts(prof.table(), ref)
    runs = units.count(summ["runs"], "run")
    peak_notes += peak.above_peak(table, ref, f"the median per call of this profile's {runs} at "
                                              f"{peak.threads_text(run_threads(prof, summ))}")
    layers = table if top is None else ranked(table, top)
    doc = {"summary": summ, "layers": layers, "files": {k: str(v) for k, v in written.items()}, "extra": prof.extra}
    # CSV keeps layers.csv's columns (a profile's file, the same on any machine): % of peak is in JSON and tables
    section = layers_section(prof, layers)
    if for_people(fmt):
        rows = ranked(table, DEFAULT_TOP if top is None else top)
        shown, outliers = marked_outliers(marked_shapes(rows, prof.layers))
        section = Section(columns=_columns(prof, summ, ref is not None), rows=rows, shown=shown,
                          title=profile_title(prof, len(rows), summ["layers"]), keys=section.keys,
                          notes=(*summary_notes(prof, summ), *outlier_note(outliers), *peak_notes))
    return View(sections=(section,), doc=doc, status=wrote_lines(written))


def _event_cost(us: float, clock: str) -> str:
    # A difference of two medians: below 0 it measured the host's noise, not a cost of the profiler.
    return f"{us:+.2f} µs {clock}" + (" (below 0: noise, not a cost)" if us < 0 else "")


def _passes(n: int) -> str:
    return f"{n} pass" if n == 1 else f"{n} passes"


def _threads(prof: Profile, summ: Mapping[str, Any]) -> str:
    asked = prof.metadata.threads
    used = summ.get("intra_op_threads")
    if used is None:
        return f"threads {asked or 'default'}" + (" (count unknown)" if prof.measurement is not None else "")
    if prof.metadata.backend != "onnxruntime":
        source = prof.measurement.intra_op_threads_source if prof.measurement is not None else None
        return f"threads {used}" + (f" ({source})" if source else "")
    how = "counted: threads the session started + the calling thread"
    return f"threads {used} ({'ONNX Runtime default, ' if not asked else ''}{how})"


def _backend_options(meta: Metadata) -> str:
    """The backend's own options: ONNX Runtime's opt level, or each option another backend recorded (the run
    plan's are on lines of their own)."""
    if meta.backend == "onnxruntime":
        return f"opt level {meta.options.get('opt_level')}"
    return ", ".join(_option(k, v) for k, v in meta.options.values if v not in (None, (), ""))


def _option(key: str, value: Any) -> str:
    """One recorded option in words: ``level 2``, ``memory``, ``events task-clock,page-faults``."""
    name = key.replace("_", " ")
    if value is True:
        return name
    if value is False:
        return f"no {name}"
    if isinstance(value, list | tuple):
        return f"{name} {','.join(map(str, value))}"
    return f"{name} {value}"


def _inputs(summ: Mapping[str, Any]) -> list[str]:
    inputs = summ.get("inputs")
    if not inputs:
        return []
    return ["inputs: " + ", ".join(f"{i['name']}={'x'.join(str(d) for d in i['shape']) or 'scalar'} {i['dtype']}"
                                   for i in inputs)]


def _plain_latency(summ: Mapping[str, Any]) -> str:
    """The whole model's latency with the profiler off, or that it was not measured (never "median ?")."""
    if summ.get("latency_median_us") is None:
        return "latency: not measured (--no-latency)"
    interleaved = summ.get("latency_interleaved")
    how = "profiler off" + ("" if interleaved is None else ", runs interleaved with the profiled ones"
                            if interleaved else ", measured apart")
    return (f"latency ({how}): median {units.duration_us(summ['latency_median_us'])}, "
            f"p90 {units.duration_us(summ['latency_p90_us'])}")


def _latency(summ: Mapping[str, Any]) -> str:
    overhead, cost = summ["profiler_overhead"], summ.get("profiler_event_cost_us")
    text = f"{_plain_latency(summ)}; profiled run median {units.duration_us(summ['profiled_median_us'])}"
    if overhead:
        text += f"; profiler overhead x{overhead:.3f}"
    cpu_cost = summ.get("profiler_event_cost_cpu_us")
    if cost is not None and summ.get("nodes_per_run"):
        text += (f"; per node event {_event_cost(cost, 'wall')}"
                 + (f", {_event_cost(cpu_cost, 'CPU')}" if cpu_cost is not None else "")
                 + f" ({summ['nodes_per_run']:g} nodes per run)")
    return text


def _padding(summ: Mapping[str, Any]) -> list[str]:
    if not summ.get("padded_layers"):
        return []
    return [f"{summ['padded_layers']} layers ran on channels padded to ONNX Runtime's NCHWc block, "
            f"shown as stored(real) dims; FLOPs count the real channels, the padding added "
            f"{units.si(summ['padding_flops'], 'FLOP')} of work"]


def _fidelity(prof: Profile, summ: Mapping[str, Any]) -> list[str]:
    fid = summ.get("fidelity")
    if not fid or prof.counters is None:
        return []
    corr, ratio = fid["rank_correlation"], fid["time_ratio"]
    against = " (against in-situ runs alternated with the timed passes)" \
        if fid.get("reference") == fidelity.INTERLEAVED else ""
    lines = [f"counters: {counted_how(prof.metadata.backend)}, {_passes(prof.counters.passes)} per event group; "
             f"fidelity vs in-situ{against}: time ratio " + (f"{ratio:.3f}" if ratio is not None else "?")
             + ", rank correlation " + (f"{corr:.3f}" if corr is not None else "n/a")
             + _ceiling(fid.get("insitu_rank_ceiling")) + _without_views(fid)]
    flagged = fid.get("flagged_layers") or []
    if flagged:
        apart = "node by node" if prof.metadata.backend == "onnxruntime" else "in the counting passes"
        of_them = fid.get("flagged_views")
        views = f" ({of_them} of them {'views' if of_them > 1 else 'a view'})" if of_them else ""
        lines.append(f"{len(flagged)} of {summ['layers']} layers{views}"
                     f" ran more than {fidelity.OFF_SHARE:.0%} slower or faster {apart} than in situ ('vs in situ' "
                     f"marked !: {_named(flagged)}): their counts describe the layer run apart, not necessarily as "
                     "it runs in the real run")
    lines += _missed(fid) + _disturbed(fid) + _sampled(fid)
    return lines


def _missed(fid: Mapping[str, Any]) -> list[str]:
    """That the figures miss their bounds, where they do, each with what the profile knows of why."""
    missed = fid.get("misses")
    if not missed:
        return []
    bounds = fid["bounds"]
    ratio, rank = bounds["time_ratio"], bounds["rank_correlation"]["low"]
    parts = []
    for name in missed:
        text = f"{name.replace('_', ' ')} {fid[name]:.3f}"
        if name == "rank_correlation":
            ceiling, without = fid.get("insitu_rank_ceiling"), fid.get("rank_correlation_without_views")
            why = []
            if ceiling is not None and ceiling < rank:
                why.append(f"the in-situ runs rank the layers against themselves at {ceiling:.3f}, about the best "
                           "any measurement can")
            if without is not None and without >= rank:
                why.append(f"the layers that are not views rank at {without:.3f}: the view layers, whose time on "
                           "either side is per-node cost rather than work, reorder")
            text += f" ({'; '.join(why)})" if why else ""
        parts.append(text)
    busy = "; the host was busy" if fid.get("disturbed_used") else ""
    return [f"the counts do not hold as in situ within the bounds (time ratio {ratio['low']:.2f}-{ratio['high']:.2f}, "
            f"rank correlation >= {rank:.2f}): " + ", ".join(parts) + busy]


def _named(layers: Sequence[str], most: int = 5) -> str:
    """The first ``most`` names, and how many more."""
    more = len(layers) - most
    return ", ".join(layers[:most]) + (f" and {more} more" if more > 0 else "")


def _ceiling(ceiling: float | None) -> str:
    """The in-situ runs' rank correlation with themselves: what the stepwise one is to be read against."""
    return "" if ceiling is None else f" (the in-situ runs against themselves: {ceiling:.3f})"


def _without_views(fid: Mapping[str, Any]) -> str:
    """The rank correlation over the layers that are not view ops, where the model has any: a view hands its
    input over, so its time on either side is the runtime's per-node cost, which ranks no work."""
    corr = fid.get("rank_correlation_without_views")
    if corr is None:
        return ""
    return (f"; without the {units.count(fid['view_layers'], 'view layer')} (Reshape, Squeeze...: no work, only "
            f"per-node cost): {corr:.3f}" + _ceiling(fid.get("insitu_rank_ceiling_without_views")))


def _sampled(fid: Mapping[str, Any]) -> list[str]:
    """How the stepwise counts compare with the same counts sampled in the real run."""
    got = fid.get("insitu_counts")
    if not got:
        return []
    parts = [f"{label} x{v['stepwise_over_insitu']:.3f}, rank correlation "
             + (f"{v['rank_correlation']:.3f}" if v["rank_correlation"] is not None else "n/a")
             for label, v in got["by_label"].items() if v["stepwise_over_insitu"] is not None]
    return [f"counts sampled in situ (every {got['sample_period_ns'] / 1e3:g} µs of CPU time, {got['runs']} runs; "
            "the 'in situ' columns): stepwise over in situ " + "; ".join(parts)] if parts else []


def _disturbed(fid: Mapping[str, Any]) -> list[str]:
    """What the host did to the timed passes: how many were set aside, or that all were used though busy."""
    n, of = fid.get("passes_disturbed"), fid.get("timing_passes")
    if not n or not of:
        return []
    if fid.get("disturbed_used"):
        return [f"the host was busy: {n} of {of} timed pass pairs waited for a CPU or ran slowed, too many to set "
                "aside; the fidelity figures hold for a busy host only"]
    return [f"{n} of {of} timed pass pairs waited for a CPU or ran slowed: set aside"]


def counted_how(backend: str | None) -> str:
    """How a backend reads its per-layer counters: ONNX Runtime's stepwise executor runs node by node apart
    from the timed runs; the torch backend reads them in situ, at its module hooks, in counting passes."""
    if backend == "onnxruntime":
        return "stepwise executor"
    return f"read in situ at {'module' if backend == 'torch' else 'layer'} boundaries"


def profile_warnings(prof: Profile, summ: Mapping[str, Any] | None = None) -> list[str]:
    """The warnings below a profile's summary lines (the host's business, the profiler's cost, figures unknown,
    the profile's own), one line each; ``summ``: its :func:`~layerperf.analysis.summary.summary`, when made."""
    summ = summary(prof) if summ is None else summ
    lines = [summ["busy_host_warning"]] if summ.get("busy_host_warning") else []
    if summ.get("profiler_warning"):
        lines.append(f"profiler cost: {summ['profiler_warning']}")
    unknown = [f"{what} unknown for {summ[key]} layers" for what, key in
               (("FLOPs", "flops_unknown_layers"), ("int ops", "int_ops_unknown_layers")) if summ.get(key)]
    if unknown:
        lines.append("; ".join(unknown))
    return lines + list(prof.warnings)


def summary_lines(prof: Profile, summ: Mapping[str, Any]) -> list[str]:
    """What was run, how long it took, the totals and the legend: the lines below the layer table."""
    meta = prof.metadata
    return [
        f"backend: {meta.backend} {meta.backend_version} ({meta.provider}), "
        f"{_backend_options(meta)}, {_threads(prof, summ)}, {units.count(summ['runs'], 'run')}",
        *_inputs(summ),
        _latency(summ),
        f"sum of layer medians {units.duration_us(summ['layers_sum_median_us'])}; total {work_line(summ)}",
        "legend: rows ranked by self % = share of all measured layer time (calls x mean); cumulative = running "
        "self %; self time = median per call; computation in FLOPs, one multiply-add = 2 FLOPs (floating "
        "point; int ops count integer work likewise); ? = unknown, never 0",
        *_padding(summ),
        *_fidelity(prof, summ),
    ]


def summary_notes(prof: Profile, summ: Mapping[str, Any]) -> list[Note]:
    """:func:`summary_lines`, then the warnings."""
    return [*notes(summary_lines(prof, summ)), *notes(profile_warnings(prof, summ), "warning")]
