"""The "% of peak" column of the profile and analyze tables: each row's achieved rate over the peak
``layerperf calibrate`` measured on the machine the run was taken on, at its thread count — or, for
the GPU work of a trace that ran on a GPU, over that device's published peak
(:mod:`layerperf.calibration.device_peaks`): a CPU calibration never rates GPU work.

The figure itself is :func:`layerperf.data.figures.peak_pcts`; this module finds the peaks that apply
and adds the column. Without a calibration (or a FLOP count) the figure is unknown, never 0; a
calibration file that cannot be read costs the column, not the report (a warning below it says why).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from layerperf.calibration.device_peaks import DevicePeaks, TraceDevice
from layerperf.calibration.peaks import Peaks, for_machine
from layerperf.data.figures import integer_kernels, rows_peak_pcts
from layerperf.errors import InputError
from layerperf.renderers.view import Column, Note
from layerperf.util import units

KEY = "pct_of_peak"
PCT_OF_PEAK = Column(KEY, "% of peak", lambda v: f"{v:.1f}%")


@dataclass(frozen=True, slots=True)
class Reference:
    """The peaks a run is compared to, and the thread counts they were measured at; or a GPU's published
    peaks (``device``), which rate only the rows rated over device time."""

    peaks: Peaks | None
    flops_per_s: float | None
    int_ops_per_s: float | None
    flops_threads: int | None
    int_threads: int | None
    asked_threads: int | None  # the run's thread count; None: unknown
    device: DevicePeaks | None = None
    device_name: str = ""

    def note(self) -> Note:
        if self.device is not None:
            d = self.device
            int8 = f", int8 {_si(d.int8_ops_per_s, 'OP/s')}" if d.int8_ops_per_s else ""
            return Note(f"% of peak = FLOP/s over device time against the published peak of {self.device_name} "
                        f"({d.model}: float32 {_si(d.fp32_flops_per_s, 'FLOP/s')}{int8}, dense; {d.source}); "
                        "ops rated over CPU time have none")
        p = self.peaks
        assert p is not None
        parts = []
        if self.flops_per_s is not None:
            parts.append(f"float32 {_si(self.flops_per_s, 'FLOP/s')} at {threads_text(self.flops_threads)}")
        if self.int_ops_per_s is not None:
            parts.append(f"int8 {_si(self.int_ops_per_s, 'OP/s')} at {threads_text(self.int_threads)}")
        run = (f"the run's {threads_text(self.asked_threads)}" if self.asked_threads
               else "the most threads measured (the run's thread count is unknown)")
        text = (f"% of peak = FLOP/s (OP/s for integer kernels) over the peak {calibration_name(p)} measured on "
                f"{p.cpu_model}, {p.cores} cores{_on(p)} for {run}: "
                + ("; ".join(parts) or "none measured"))
        return Note(text)

    def quick_warning(self) -> list[Note]:
        """Where the peaks are a --quick calibration's: a warning that says so and how to replace them."""
        if self.peaks is None or not self.peaks.quick:
            return []
        return [Note("% of peak is over a --quick calibration (small sizes, short repeats: a smoke test, not this "
                     f"machine's peaks); {REPLACE_QUICK}", "warning")]

    def peak_of(self, row: Mapping[str, Any]) -> tuple[str, float | None, int | None, str]:
        """The peak a row is compared to: its kind, rate and thread count, and the row's own rate key."""
        if bool(integer_kernels(row.get("flops") or 0.0, row.get("int_ops") or 0.0)):
            return "int8 OP/s", self.int_ops_per_s, self.int_threads, "int_ops_per_s"
        return "float32 FLOP/s", self.flops_per_s, self.flops_threads, "flops_per_s"


REPLACE_QUICK = "run `layerperf calibrate` (without --quick) on a quiet machine to replace it with this machine's peaks"


def calibration_name(peaks: Peaks) -> str:
    """How a calibration is named wherever its peaks are used: a quick one says so."""
    return "the --quick calibration" if peaks.quick else "the calibration"


def _on(peaks: Peaks, how: str = " ") -> str:
    """The day a calibration was measured, as `` (2026-11-24)`` or `` of 2026-11-24``; nothing when unknown."""
    day = peaks.measured_at[:10]
    return "" if not day else f" ({day})" if how == " " else f"{how}{day}"


def threads_text(n: int | None) -> str:
    """``1 thread``, ``4 threads``; a count not known says so."""
    if not n:
        return "an unknown thread count"
    return f"{n} thread" if n == 1 else f"{n} threads"


def _si(value: float, unit: str) -> str:
    return units.si(value, unit)


AUTO: Any = "auto"  # the peaks of the machine the run was taken on, from the cache directory


def device_reference(device: TraceDevice, peaks: Peaks | None | str = AUTO) -> tuple[Reference | None, list[Note]]:
    """The published peaks of the GPU a trace ran on, when listed; never a CPU calibration (one given is
    set aside, and a note says so)."""
    if peaks is None:
        return None, []
    aside = [Note(f"the calibration given is of a CPU: {device.label()}'s work is not rated against it (set aside)",
                  "warning")] if peaks is not AUTO else []
    if device.peaks is None:
        return None, [*aside, Note(f"% of peak unknown: {device.label()} is not among the GPUs whose published "
                                   "peaks layerperf lists; this machine's CPU calibration does not apply to GPU work")]
    d = device.peaks
    ref = Reference(None, d.fp32_flops_per_s, d.int8_ops_per_s, None, None, None, d, device.name or "")
    return ref, [*aside, ref.note()]


def reference(machine: Mapping[str, Any] | None, threads: int | None,
              peaks: Peaks | None | str = AUTO, device: TraceDevice | None = None) -> tuple[Reference | None,
                                                                                        list[Note]]:
    """The peaks of ``machine`` (a profile's ``metadata["machine"]``; None: this machine) at ``threads``,
    or None with the warning saying why not when its calibration file is unreadable. ``peaks`` given
    (not :data:`AUTO`): those peaks, or None for no column at all. ``device``: the GPU a trace ran on,
    whose published peaks apply instead (:func:`device_reference`)."""

    if device is not None:
        return device_reference(device, peaks)
    if peaks is AUTO:
        try:
            peaks = for_machine(machine)
        except InputError as exc:
            return None, [Note(f"% of peak unknown: {exc}", "warning")]
    if peaks is None or isinstance(peaks, str):
        return None, []
    ref = Reference(peaks, peaks.at(peaks.flops_per_s, threads), peaks.at(peaks.int_ops_per_s, threads),
                    peaks.threads_at(peaks.flops_per_s, threads), peaks.threads_at(peaks.int_ops_per_s, threads),
                    threads or None)
    return ref, [ref.note(), *ref.quick_warning()]


def with_pcts(rows: Sequence[Mapping[str, Any]], ref: Reference | None) -> list[dict[str, Any]]:
    """``rows`` with :data:`KEY` added once calibrated: the % of peak, None where unknown (no FLOPs).
    Without a calibration the rows stay as they were: outputs keep their exact keys until one is made."""

    if ref is None:
        return [dict(r) for r in rows]
    pcts = rows_peak_pcts(rows, ref.flops_per_s, ref.int_ops_per_s)
    if ref.device is not None:  # a GPU's peak rates GPU work only
        pcts = [p if r.get("rate_time") == "device" else None for r, p in zip(rows, pcts, strict=True)]
    return [{**r, KEY: p} for r, p in zip(rows, pcts, strict=True)]


def with_column(columns: Sequence[Column]) -> list[Column]:
    """``columns`` with the % of peak after the last rate column (OP/s, else FLOPS; at the end if none)."""
    cols = list(columns)
    keys = [c.key for c in cols]
    anchor = "int_ops_per_s" if "int_ops_per_s" in keys else "flops_per_s"
    at = keys.index(anchor) + 1 if anchor in keys else len(cols)
    cols[at:at] = [PCT_OF_PEAK]
    return cols


def above_peak(rows: Sequence[Mapping[str, Any]], ref: Reference | None, run: str, what: str = "layers") -> list[Note]:
    """A warning when some rows went past the calibrated peak, naming the fastest one, the peak it is
    compared to (which kind, which calibration, at how many threads) and the run its rate comes from
    (``run``, e.g. "the median of this profile's 100 runs at 2 threads"); then why such a figure
    happens: a --quick calibration, or one below what this machine does."""
    over = [r for r in rows if (r.get(KEY) or 0) > 100]
    if not over or ref is None:
        return []
    if ref.device is not None:  # a GPU's published peak: only rows rated over device time have a figure
        top_pct = max(float(r[KEY]) for r in over)
        return [Note(f"{len(over)} {what} ran above the device's float32 peak (up to {top_pct:.0f}%): their float32 "
                     "work ran on tensor cores (TF32: cuDNN convolutions do by default), whose ceiling is higher")]
    assert ref.peaks is not None
    top = max(over, key=lambda r: float(r[KEY]))
    kind, peak, threads, rate_key = ref.peak_of(top)
    unit = kind.partition(" ")[2]
    rate = _si(float(top[rate_key]), unit) if top.get(rate_key) is not None else "?"
    quick = "--quick " if ref.peaks.quick else ""
    head = (f"{len(over)} {what} ran above the {quick}calibrated peak: {top.get('name')} ran at {rate}, "
            f"{float(top[KEY]):.0f}% of the {kind} peak {_si(peak or 0.0, unit)} that "
            f"{calibration_name(ref.peaks)}{_on(ref.peaks, ' of ')} measured at {threads_text(threads)}; "
            f"its rate is {run}")
    why = (f"A --quick calibration's small sizes run below this machine's peaks: {REPLACE_QUICK}" if ref.peaks.quick
           else "The calibration is below what this machine does here (it ran disturbed, or at another clock): "
                "run layerperf calibrate again on a quiet machine")
    return [Note(f"{head}. {why}", "warning")]
