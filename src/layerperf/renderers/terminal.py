"""Terminal tables and summaries (rich). Knows figures and units, nothing about runtimes."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from rich.console import Console
from rich.table import Table

from layerperf import units


@dataclass(frozen=True, slots=True)
class Column:
    key: str
    header: str
    fmt: Callable[[Any], str] = str
    justify: str = "right"


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


def marked_shapes(rows: Sequence[dict[str, Any]], layers: Sequence[Any]) -> list[dict[str, Any]]:
    """Rows whose shapes show padded dims as ``stored(real)``, e.g. ``1x24(20)x16x16``: for people only,
    the rows' own ``in_shapes``/``out_shapes`` keep the plain stored dims."""
    by_name = {layer.name: layer for layer in layers}
    out = []
    for row in rows:
        layer = by_name.get(row.get("name"))
        if layer is not None and layer.padded:
            row = {**row, "in_shapes": ";".join(t.marked_shape_str() for t in layer.inputs),
                   "out_shapes": ";".join(t.marked_shape_str() for t in layer.outputs)}
        out.append(row)
    return out


def header(key: str, columns: Sequence[Column] = LAYER_COLUMNS) -> str:
    """The header a column key is shown under."""
    return next(c.header for c in columns if c.key == key)


def table(rows: Sequence[dict[str, Any]], columns: Sequence[Column], title: str | None = None) -> Table:
    t = Table(title=title, title_justify="left", header_style="bold")
    for col in columns:
        t.add_column(col.header, justify=col.justify,  # type: ignore[arg-type]
                     no_wrap=col.justify == "right", overflow="fold")
    for row in rows:
        t.add_row(*(col.fmt(row.get(col.key)) if row.get(col.key) is not None else "?" for col in columns))
    return t


def counter_columns(labels: Sequence[str]) -> list[Column]:
    return [Column(label, label, lambda v: units.si(v)) for label in labels]


def console(stderr: bool = False) -> Console:
    import sys

    stream = sys.stderr if stderr else sys.stdout
    # Piped or redirected output has no width to fit: keep tables wide rather than folded.
    return Console(stderr=stderr, width=None if stream.isatty() else 240)
