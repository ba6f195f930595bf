"""Columns several views share: the layer table's, integer work, counters."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from layerperf.renderers.view import Column
from layerperf.util import units


def _ratio(unit: str) -> Callable[[Any], str]:
    return lambda v: units.si(v, unit)


# The columns of MegEngine's profile_analyze, in its order, plus provider and calls.
LAYER_COLUMNS: tuple[Column, ...] = (
    Column("median_us", "self time", units.duration_us),
    Column("share", "self %", units.percent),
    Column("cum_share", "cumulative", units.percent),
    Column("name", "name", str, "left"),
    Column("op_type", "type", str, "left"),
    Column("provider", "provider", lambda p: str(p).removesuffix("ExecutionProvider"), "left"),
    Column("calls", "calls"),
    Column("flops", "computation", _ratio("FLOP")),
    Column("flops_per_s", "FLOPS", _ratio("FLOP/s")),
    Column("bytes", "memory", units.binary),
    Column("bytes_per_s", "bandwidth", lambda v: units.binary(v) + "/s" if v is not None else "?"),
    Column("in_shapes", "in_shapes", str, "left"),
    Column("out_shapes", "out_shapes", str, "left"),
)


# Integer work, shown only where there is some: most models do none, and the table is wide already.
INT_COLUMNS: tuple[Column, ...] = (
    Column("int_ops", "int ops", _ratio("OP")),
    Column("int_ops_per_s", "OP/s", _ratio("OP/s")),
)


def layer_columns(int_ops: bool) -> list[Column]:
    """The layer table's columns, with the integer-work ones after FLOPS when ``int_ops``."""
    return with_int_columns(LAYER_COLUMNS) if int_ops else list(LAYER_COLUMNS)


def with_int_columns(columns: Sequence[Column]) -> list[Column]:
    """``columns`` with :data:`INT_COLUMNS` after the FLOPS column (at the end if there is none)."""
    cols = list(columns)
    at = next((i + 1 for i, c in enumerate(cols) if c.key == "flops_per_s"), len(cols))
    cols[at:at] = INT_COLUMNS
    return cols


def counter_columns(labels: Sequence[str]) -> list[Column]:
    return [Column(label, label, lambda v: units.si(v)) for label in labels]


def header(key: str, columns: Sequence[Column] = LAYER_COLUMNS) -> str:
    """The header a column key is shown under."""
    return next(c.header for c in columns if c.key == key)


def text(key: str, header: str) -> Column:
    """A column of text, left-aligned."""
    return Column(key, header, str, "left")

