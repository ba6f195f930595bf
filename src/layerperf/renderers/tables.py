"""Rows of ``analyze`` and ``diff`` in the four output formats: table, csv, json, markdown.

table and markdown are for people (units, ``?`` for unknown); csv and json are for programs (raw
numbers in the units their names say, empty cell / null for unknown).
"""

from __future__ import annotations

import csv
import io
import sys
from collections.abc import Sequence
from typing import Any

import orjson

from layerperf import units
from layerperf.renderers.csv import _cell as cell
from layerperf.renderers.terminal import LAYER_COLUMNS, Column

FORMATS = ("table", "csv", "json", "markdown")


def signed_us(v: Any) -> str:
    return ("+" if v > 0 else "-" if v < 0 else "") + units.duration_us(abs(v))


def speedup(v: Any) -> str:
    return f"x{v:.3f}"


# analyze: the layer table's columns (MegEngine profile_analyze's order), self time being the aggregate
ANALYZE_COLUMNS: tuple[Column, ...] = (Column("time_us", "self time", units.duration_us), *LAYER_COLUMNS[1:])
INCLUSIVE = Column("incl_us", "inclusive", units.duration_us)
DEVICE = Column("device_us", "device self", units.duration_us)  # kernels the op launched itself
DEVICE_INCL = Column("device_incl_us", "device incl", units.duration_us)  # ... or any op nested in it
RATE_TIME = Column("rate_time", "FLOPS over", str, "left")  # "device" or "cpu" (self time)
KERNEL_COLUMNS: tuple[Column, ...] = (
    Column("total_us", "device time", units.duration_us),
    Column("share", "share", units.percent),
    Column("name", "kernel", str, "left"),
    Column("kind", "kind", str, "left"),
    Column("device", "device", str, "left"),
    Column("calls", "calls"),
    Column("mean_us", "mean", units.duration_us),
    Column("launcher_share", "of launchers' device time", units.percent),
    Column("launched_by", "launched by (calls)", str, "left"),
)

DIFF_COLUMNS: tuple[Column, ...] = (
    Column("key", "name", str, "left"),
    Column("op_type", "type", str, "left"),
    Column("calls_a", "calls A"),
    Column("calls_b", "calls B"),
    Column("time_a_us", "time A", units.duration_us),
    Column("time_b_us", "time B", units.duration_us),
    Column("delta_us", "delta", signed_us),
    Column("delta_pct", "delta %", lambda v: ("+" if v > 0 else "") + units.percent(v)),
    Column("speedup", "speedup", speedup),
    Column("only_in", "only in", str, "left"),
)
# shown when some pair's names differ
DIFF_NAME_B = Column("key_b", "name in B", str, "left")
DIFF_MATCH = Column("match", "matched by", str, "left")
DIFF_TYPE_B = Column("op_type_b", "type in B", str, "left")


def to_csv(rows: Sequence[dict[str, Any]], keys: Sequence[str]) -> str:
    text = io.StringIO(newline="")
    out = csv.writer(text, lineterminator="\n")
    out.writerow(keys)
    for row in rows:
        out.writerow([cell(row.get(k)) for k in keys])
    return text.getvalue()


def to_json(doc: Any) -> str:
    # orjson writes NaN as null, so an unknown that slipped through still never reads as 0
    return orjson.dumps(doc, option=orjson.OPT_INDENT_2 | orjson.OPT_SERIALIZE_NUMPY).decode() + "\n"


def _md_escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ")


def _formatted(row: dict[str, Any], col: Column) -> str:
    value = row.get(col.key)
    return "?" if value is None else col.fmt(value)


def to_markdown(rows: Sequence[dict[str, Any]], columns: Sequence[Column], title: str | None = None,
                notes: Sequence[str] = ()) -> str:
    lines = [f"**{_md_escape(title)}**", ""] if title else []
    lines.append("| " + " | ".join(_md_escape(c.header) for c in columns) + " |")
    lines.append("| " + " | ".join("---:" if c.justify == "right" else ":---" for c in columns) + " |")
    for row in rows:
        lines.append("| " + " | ".join(_md_escape(_formatted(row, c)) for c in columns) + " |")
    if notes:
        lines.append("")
        lines.extend(notes)
    return "\n".join(lines) + "\n"


def emit(fmt: str, rows: Sequence[dict[str, Any]], columns: Sequence[Column], *, keys: Sequence[str],
         title: str | None = None, notes: Sequence[str] = (), doc: Any = None) -> None:
    """Print rows to stdout as ``fmt``. json prints ``doc`` when given (else the rows array); csv
    prints ``keys``; table and markdown print ``columns`` with ``title`` above and ``notes`` below."""
    if fmt == "json":
        sys.stdout.write(to_json(rows if doc is None else doc))
    elif fmt == "csv":
        sys.stdout.write(to_csv(rows, keys))
    elif fmt == "markdown":
        sys.stdout.write(to_markdown(rows, columns, title, notes))
    else:
        from layerperf.renderers import terminal as render

        con = render.console()
        con.print(render.table(rows, columns, title=title))
        for line in notes:
            con.print(line, highlight=False, markup=False)
