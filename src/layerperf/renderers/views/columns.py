"""Columns several views share: the layer table's, integer work, counters."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from layerperf.data import fidelity
from layerperf.renderers.view import KEEP, LOW, Column
from layerperf.util import units

NAME_MIN = 24  # a name shortened to fit a terminal keeps this many characters at least
TYPE_MIN = 10


def _ratio(unit: str) -> Callable[[Any], str]:
    return lambda v: units.si(v, unit)


def text(key: str, header: str, *, priority: int = 2, min_width: int = 0, wrap: bool = False) -> Column:
    """A column of text, left-aligned; ``min_width``: it may be shortened (or wrapped) down to that."""
    return Column(key, header, str, "left", priority=priority, min_width=min_width, wrap=wrap)


def name_column(key: str, header: str) -> Column:
    """The column that says which row is which: always shown, shortened in the middle when it must."""
    return text(key, header, priority=KEEP, min_width=NAME_MIN)


def prose(key: str, header: str, priority: int = 2) -> Column:
    """A column of sentences, wrapped on words in a narrow terminal."""
    return text(key, header, priority=priority, min_width=20, wrap=True)


# The columns of MegEngine's profile_analyze, in its order, plus provider and calls. The priorities say
# what a narrow terminal keeps: the name and the ranked column (the profile's self %; see ranked_by), then
# self time and type, the work and rates, and last the shapes and the provider.
LAYER_COLUMNS: tuple[Column, ...] = (
    Column("median_us", "self time", units.duration_us, priority=1),
    Column("share", "self %", lambda v: v if isinstance(v, str) else units.percent(v), priority=KEEP),  # str: marked
    Column("cum_share", "cumulative", units.percent),
    name_column("name", "name"),
    text("op_type", "type", priority=1, min_width=TYPE_MIN),
    Column("provider", "provider", lambda p: str(p).removesuffix("ExecutionProvider"), "left", priority=LOW + 1),
    Column("calls", "calls", priority=3),
    Column("flops", "computation", _ratio("FLOP")),
    Column("flops_per_s", "FLOPS", _ratio("FLOP/s")),
    Column("bytes", "memory", units.binary, priority=3),
    Column("bytes_per_s", "bandwidth", lambda v: units.binary(v) + "/s" if v is not None else "?", priority=3),
    text("in_shapes", "in_shapes", priority=LOW),
    text("out_shapes", "out_shapes", priority=LOW),
)


# Integer work, shown only where there is some: most models do none, and the table is wide already.
INT_COLUMNS: tuple[Column, ...] = (
    Column("int_ops", "int ops", _ratio("OP"), priority=3),
    Column("int_ops_per_s", "OP/s", _ratio("OP/s"), priority=3),
)


FLOAT_KEYS = ("flops", "flops_per_s")


def layer_columns(int_ops: bool, mostly_int: bool = False) -> list[Column]:
    """The layer table's columns, with the integer-work ones after FLOPS when ``int_ops``; when
    ``mostly_int`` (integer work outweighs float work: a quantized model) int ops and OP/s are kept
    before computation and FLOPS in a narrow terminal."""
    if not int_ops:
        return list(LAYER_COLUMNS)
    cols = with_int_columns(LAYER_COLUMNS)
    if mostly_int:
        swap = {c.key: c.priority for c in cols if c.key in FLOAT_KEYS}
        cols = [replace(c, priority=swap["flops"]) if c in INT_COLUMNS else
                replace(c, priority=INT_COLUMNS[0].priority) if c.key in swap else c for c in cols]
    return cols


def with_int_columns(columns: Sequence[Column]) -> list[Column]:
    """``columns`` with :data:`INT_COLUMNS` after the FLOPS column (at the end if there is none)."""
    cols = list(columns)
    at = next((i + 1 for i, c in enumerate(cols) if c.key == "flops_per_s"), len(cols))
    cols[at:at] = INT_COLUMNS
    return cols


DERIVED = ("_per_flop",)  # metrics computed from a counter (not asked for by name)


def _counter_format(label: str, events: Mapping[str, str]) -> Callable[[Any], str]:
    """perf's software clocks count nanoseconds: shown as a time, with its unit (whatever the label, by the
    event it counts: ``events`` maps a label to it, a label not there being an event's name itself)."""
    from layerperf.counters.catalog import counts_ns  # lazy: ctypes and libpfm4 only where counters are

    base = label.removesuffix("_per_call")
    per_flop = base.endswith("_per_flop")
    counter = base.removesuffix("_per_flop")
    if not counts_ns(events.get(counter, counter)):
        return lambda v: units.si(v)
    if per_flop:
        return lambda v: units.si(v, "ns/FLOP")
    return lambda v: units.duration_us(v / 1000.0) if v is not None else "?"


def _time_ratio(v: float) -> str:
    return f"{v:.2f}" + (" !" if fidelity.off(v) else "")  # "!": off by more than fidelity.OFF_SHARE


def _beside(key: str, labels: Sequence[str]) -> bool:
    """Whether a key is shown beside its count's column rather than on its own (CV, in situ)."""
    return any(key.endswith(suffix) and key[:-len(suffix)] in labels for suffix in ("_cv", "_insitu"))


def counter_columns(labels: Sequence[str], events: Mapping[str, str] | None = None) -> list[Column]:
    """Columns of the counters asked for (``--events``), kept before most others in a narrow terminal
    (the user named them), and their derived metrics; a clock counted in ns prints as a time (``events``:
    the event each label counts, where a label is not its event's name). Beside each
    count its CV over the passes (a percentage) and the same count sampled in situ where taken; the
    stepwise/in-situ time ratio, flagged ``!`` when off by more than 20% (the flag's own key is for
    programs: the cell says it)."""
    out = []
    for label in labels:
        if label == "stepwise_ratio":
            out.append(Column(label, "vs in situ", _time_ratio, priority=2))  # narrow: kept in 80 columns
        elif label != "stepwise_off" and not _beside(label, labels):
            out.append(Column(label, label, _counter_format(label, events or {}),
                              priority=3 if label.endswith(DERIVED) else 1))
            if f"{label}_cv" in labels:  # the spread beside its median
                out.append(Column(f"{label}_cv", "cv", lambda v: f"{100 * v:.0f}%", priority=3))
            if f"{label}_insitu" in labels:  # the same count, sampled in the real run
                out.append(Column(f"{label}_insitu", "in situ", _counter_format(label, events or {}), priority=3))
    return out


def header(key: str, columns: Sequence[Column] = LAYER_COLUMNS) -> str:
    """The header a column key is shown under."""
    return next(c.header for c in columns if c.key == key)


def type_repeats_name(names: Sequence[str | None], types: Sequence[str | None]) -> bool:
    """Whether a type column says nothing its name column does not: every row's type is its name (a
    PyTorch trace's op type is the op's name), so a terminal shows it once. No rows: False."""
    return bool(names) and list(types) == list(names)


def ranked_by(columns: Sequence[Column], key: str | None) -> list[Column]:
    """``columns`` with the one under ``key`` kept in any terminal (the column the rows are ranked by),
    the one kept before it (another ranking's) given way to; the name stays kept."""
    if key is None or key not in {c.key for c in columns}:
        return list(columns)
    return [replace(c, priority=KEEP) if c.key == key else
            replace(c, priority=1) if c.priority == KEEP and not c.min_width else c for c in columns]
