"""The view of ``layerperf calibrate``: each kernel's rate per thread count, then the peaks stored."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from layerperf.calibration.measure import KIND, Measured
from layerperf.calibration.peaks import Peaks
from layerperf.renderers.view import KEEP, LOW, Column, Note, Section, View
from layerperf.renderers.views.columns import text
from layerperf.renderers.views.peak import REPLACE_QUICK
from layerperf.util import units

if TYPE_CHECKING:
    pass

KERNEL_UNITS = {"flops": "FLOP/s", "int_ops": "OP/s", "bytes": "B/s"}
PEAK_KINDS = (("flops_per_s", "flops", "float32 FLOP/s"), ("int_ops_per_s", "int_ops", "int8 OP/s"),
              ("bytes_per_s", "bytes", "bandwidth"))


def rate_text(value: float | None, kind: str | None) -> str:
    """A rate in its unit: bandwidth in binary units (GiB/s), FLOP/s and OP/s in SI ones."""
    if value is None:
        return "?"
    if kind == "bytes":
        return units.binary(value) + "/s"
    return units.si(value, KERNEL_UNITS.get(kind or "", ""))


def _rate_column(key: str, header: str, priority: int = KEEP) -> Column:
    # formatted in the shown rows: the unit depends on the row's kind
    return Column(key, header, str, priority=priority)


KERNEL_COLUMNS = (text("kernel", "kernel", priority=KEEP), Column("threads", "threads", priority=KEEP),
                  _rate_column("rate", "rate (best)"), _rate_column("median_rate", "median", 2),
                  Column("best_us", "per call", units.duration_us), Column("repeats", "repeats", priority=4),
                  Column("set_aside", "set aside", priority=3), Column("loops", "calls each", priority=4),
                  text("shapes", "input shapes", priority=LOW, min_width=12),
                  text("ran", "ONNX Runtime ran", priority=LOW, min_width=12))
STORED_COLUMNS = (text("kernel", "kernel", priority=KEEP), Column("threads", "threads", priority=KEEP),
                  _rate_column("rate", "rate"))
PEAK_COLUMNS = (Column("threads", "threads", priority=KEEP),
                *(_rate_column(key, header) for key, _, header in PEAK_KINDS))


def _kind(kernel: str) -> str | None:
    return KIND.get(kernel)


def peak_rows(peaks: Peaks) -> list[dict[str, Any]]:
    """One row per thread count: the best rate of each kind (None where not measured)."""
    threads = sorted(set(peaks.flops_per_s) | set(peaks.int_ops_per_s) | set(peaks.bytes_per_s))
    return [{"threads": t, "flops_per_s": peaks.flops_per_s.get(t), "int_ops_per_s": peaks.int_ops_per_s.get(t),
             "bytes_per_s": peaks.bytes_per_s.get(t)} for t in threads]


def _machine_notes(peaks: Peaks, file: Path | None, verb: str) -> list[Note]:
    lines = [Note(f"{peaks.cpu_model}, {peaks.cores} cores; ONNX Runtime {peaks.onnxruntime or '?'}; "
                  f"measured {peaks.measured_at or '?'}"),
             Note("rate = work per call over the fastest of the timed repeats (the host's noise only slows a "
                  "kernel; repeats during which a thread waited for a CPU are set aside); FLOP/s and OP/s count a "
                  "multiply-add as 2; bandwidth = bytes read + written per s")]
    if peaks.quick:
        lines.append(Note("a --quick run (small sizes, short repeats): a smoke test, not this machine's peaks; "
                          "% of peak uses it only while no full calibration exists, and names it as quick; "
                          f"{REPLACE_QUICK}", "warning"))
    if file is not None:
        lines.append(Note(f"{verb} {file}"))
    return lines


def calibration_view(peaks: Peaks, measured: Sequence[Measured] = (), file: Path | None = None,
                     verb: str = "wrote", stored: bool = True) -> View:
    """The kernels (as measured now when ``measured`` is given, else as stored) and the peaks per thread
    count; ``file`` is where they are (``stored``) or would have been stored."""
    if measured:
        rows = [m.row() for m in measured]
        columns: Sequence[Column] = KERNEL_COLUMNS
    else:
        rows = [{"kernel": k, "kind": _kind(k), "threads": t, "rate": r}
                for k, by_threads in peaks.kernels.items() for t, r in sorted(by_threads.items())]
        columns = STORED_COLUMNS
    shown = [{**r, "rate": rate_text(r["rate"], r["kind"]),
              "median_rate": rate_text(r.get("median_rate"), r["kind"])} for r in rows]
    prows = peak_rows(peaks)
    pshown = [{"threads": r["threads"], **{key: rate_text(r[key], kind) for key, kind, _ in PEAK_KINDS}}
              for r in prows]
    kernels = Section(columns=columns, rows=rows, shown=shown, title="calibration: kernels on ONNX Runtime")
    best = Section(columns=PEAK_COLUMNS, rows=prows, shown=pshown, title="peaks (best kernel of each kind)",
                   notes=_machine_notes(peaks, file, verb))
    doc = {"calibration": peaks.to_json(), "file": str(file) if file is not None else None, "stored": stored,
           "measurements": rows if measured else []}
    return View(sections=(kernels, best), doc=doc)


def none_view(file: Path) -> View:
    """``--show`` on a machine never calibrated: one line."""
    line = f"no calibration for this machine ({file}): run layerperf calibrate"
    return View(sections=(Section(columns=(), rows=(), notes=(Note(line),)),),
                doc={"calibration": None, "file": str(file), "stored": False, "measurements": []})
