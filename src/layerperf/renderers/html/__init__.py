"""The visual report: one self-contained HTML page of a trace (or of two, side by side).

>>> import layerperf
>>> prof = layerperf.profile("resnet18", runs=20)
>>> layerperf.report(prof, "report.html")          # or a trace path, a Calls table
>>> layerperf.report("a/trace.json", "diff.html", "b/trace.json")   # A and B side by side

The page inlines every style, script and datum and fetches nothing; what a model or trace names is
escaped (:mod:`layerperf.renderers.html.page`). Its parts: :mod:`.build` (the page of one trace) and
:mod:`.diffpage` (of two), :mod:`.facts` (the summary), :mod:`.table` (the layer table), :mod:`.charts`,
:mod:`.roofline` and :mod:`.gpu` (the SVG charts), :mod:`.runs`, :mod:`.gantt` and :mod:`.timeline_part`
(the timeline's data and markup), :mod:`.counters`; ``timeline.js`` (the canvas timeline),
``timeline_input.js`` (its zoom and pan) and ``report.js`` (sorting, selecting, tooltips), one script;
``report.css``.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from layerperf.calibration.peaks import Peaks
from layerperf.errors import InputError
from layerperf.renderers.html import build, diffpage, source
from layerperf.renderers.html.build import AUTO, write
from layerperf.renderers.html.source import Source
from layerperf.util.atomic import check_dir

if TYPE_CHECKING:
    pass

NAME = "html"
SUFFIXES = (".html", ".htm")

__all__ = ["NAME", "SUFFIXES", "Source", "check_output", "html", "report"]


def html(a: Any, b: Any = None, *, peaks: Peaks | None | str = AUTO, match: str = "normalized",
         **diff: Any) -> str:
    """The page's text: the report of ``a`` (a Profile, a Calls table or a trace path), or, with ``b``, the
    side-by-side report of ``a`` (baseline) and ``b`` (``match`` and ``diff``: ``how``, ``by``, ``order_by``,
    ``top`` as :func:`layerperf.renderers.views.diff.diff_view` takes them).
    ``peaks``: the calibration drawn as roofline ceilings (default: the calibration of the machine the
    profile ran on, when there is one; None: none)."""

    made: list[Source] = []  # the sources read here, closed here (a Source given stays the caller's)

    def of(subject: Any) -> Source:
        src = source.of(subject)
        if src is not subject:
            made.append(src)
        return src

    try:
        if b is None:
            return build.single(of(a), peaks)
        return diffpage.pair(of(a), of(b), match=match, **diff)  # no roofline: peaks do not apply
    finally:
        for src in made:
            src.close()


def check_output(path: str | Path) -> Path:
    """Refuse, before any work, a report path that cannot be written: not .html, a directory, or in a
    directory that could not be created or written (nothing is created: writing the page creates the
    missing directories, as ``profile --out`` does)."""
    target = Path(path)
    if target.suffix.lower() not in SUFFIXES:
        raise InputError(f"report {path} must be an .html file", hint="e.g. -o report.html")
    if target.is_dir():
        raise InputError(f"report {path} is a directory", hint="name a file, e.g. report.html")
    check_dir(target.absolute().parent)
    return target


def report(a: Any, path: str | Path, b: Any = None, *, peaks: Peaks | None | str = AUTO,
           match: str = "normalized") -> Path:
    """Write the report of ``a`` (or of ``a`` against ``b``) to ``path`` (whole or not at all); see :func:`html`."""

    target = check_output(path)
    return write(html(a, b, peaks=peaks, match=match), target)
