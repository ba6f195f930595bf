"""The page: one HTML document with every style, script and datum inlined, and nothing to fetch.

Safety is here, in one place. Text from a model or a trace (node names, op types, shapes, metadata,
warnings) enters the page only through :func:`esc` (HTML and SVG text and attribute values) or
:func:`json_block` (data the script reads, with ``<``, ``>`` and ``&`` written as ``\\u003c``,
``\\u003e``, ``\\u0026``, so that no string can end the block); the script puts data into the page
with ``textContent``, never as markup. A Content-Security-Policy lets the page run its own script,
by its hash, and nothing else, and fetch nothing.
"""

from __future__ import annotations

import base64
import hashlib
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from typing import Any

import orjson

from layerperf.renderers.view import Column, Row, Section

_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
_ESCAPES = str.maketrans({"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;"})


def esc(text: object) -> str:
    """Text made safe for HTML (and SVG) content and quoted attribute values; control characters dropped."""
    return _CONTROL.sub("", str(text)).translate(_ESCAPES)


def json_block(element_id: str, data: Any) -> str:
    """``data`` as a JSON data block the script reads: no string in it can close the block."""
    text = orjson.dumps(data, option=orjson.OPT_SERIALIZE_NUMPY).decode()
    text = text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    return f'<script type="application/json" id="{esc(element_id)}">{text}</script>'


@cache
def asset(name: str) -> str:
    return resources.files(__package__).joinpath(name).read_text(encoding="utf-8")


def script_hash(script: str) -> str:
    """The CSP source of an inline script: ``sha256-`` and the base64 of its text's digest."""
    return "sha256-" + base64.b64encode(hashlib.sha256(script.encode("utf-8")).digest()).decode("ascii")


def csp(script: str) -> str:
    return (f"default-src 'none'; script-src '{script_hash(script)}'; style-src 'unsafe-inline'; "
            "img-src data:; base-uri 'none'; form-action 'none'")


@dataclass(frozen=True, slots=True)
class Table:
    """A sortable, filterable table: its element id, the section it shows, and the row key whose value
    names a row (``data-name``, and what the filter matches with ``op_type``). ``groups``: what a chart's
    op type selects exactly, per row (default: its ``op_type``); ``hints``: a header's explanation (its
    unit, its statistic) by column key; ``marked``: per column key, which rows' cells are marked (a
    figure far from its median); ``pinned``: the column kept in view when the table scrolls sideways;
    ``filtered``: whether the filter box and a chart's selection apply to it."""

    element_id: str
    section: Section
    name_key: str = "name"
    noun: str = "layers"
    groups: Sequence[str] | None = None
    hints: Mapping[str, str] = field(default_factory=dict)
    marked: Mapping[str, Callable[[Row], bool]] = field(default_factory=dict)
    pinned: str = "name"
    filtered: bool = True  # whether the filter and a chart's selection apply to it


def _numeric(rows: Sequence[Row], key: str) -> bool:
    values = [r.get(key) for r in rows if r.get(key) is not None]
    return bool(values) and all(isinstance(v, int | float) and not isinstance(v, bool) for v in values)


def _cell_value(value: Any) -> Any:
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, int | float | str):
        return value
    return str(value)


def _th(table: Table, column: Column, numeric: bool) -> str:
    cls = ("num" if numeric else "t") + (" pin" if column.key == table.pinned else "")
    hint = table.hints.get(column.key)
    title = f' title="{esc(hint)}"' if hint else ""
    return (f'<th data-key="{esc(column.key)}" scope="col" class="{cls}" tabindex="0"{title}>'
            f"{esc(column.header)}</th>")


def _td(table: Table, column: Column, numeric: bool, shown: Row, row: Row) -> str:
    classes = [] if numeric else ["t"]
    if column.key == table.pinned:
        classes.append("pin")
    mark = table.marked.get(column.key)
    if mark is not None and mark(row):
        classes.append("far")
    cls = f' class="{" ".join(classes)}"' if classes else ""
    return f"<td{cls}>{esc(column.cell(shown))}</td>"


def table_html(table: Table) -> str:
    """The table's markup (rows escaped, in the section's order) with ``data-key`` headers."""
    section = table.section
    columns: Sequence[Column] = section.columns
    numeric = [_numeric(section.rows, c.key) for c in columns]
    head = "".join(_th(table, c, n) for c, n in zip(columns, numeric, strict=True))
    body = []
    for i, shown in enumerate(section.people_rows):
        row = section.rows[i]
        # numbers are most cells: they go bare (right-aligned by the style), text cells are marked
        cells = "".join(_td(table, c, n, shown, row) for c, n in zip(columns, numeric, strict=True))
        body.append(f'<tr data-name="{esc(row.get(table.name_key, ""))}">{cells}</tr>')
    return (f'<table id="{esc(table.element_id)}" class="sortable"><thead><tr>{head}</tr></thead>'
            f"<tbody>{''.join(body)}</tbody></table>")


def table_data(table: Table) -> dict[str, Any]:
    """What the script sorts and filters by: each column's raw values (None unknown), names, op types,
    and the group (op type, or op family) a chart's bar selects exactly."""
    section = table.section
    keys = [c.key for c in section.columns]
    types = [str(r.get("op_type") or "") for r in section.rows]
    return {"keys": keys, "numeric": [_numeric(section.rows, k) for k in keys],
            "rows": [[_cell_value(r.get(k)) for k in keys] for r in section.rows],
            "names": [str(r.get(table.name_key) or "") for r in section.rows],
            "types": types, "groups": list(table.groups) if table.groups is not None else types,
            "noun": table.noun, "filtered": table.filtered}


def filter_bar(tables: Sequence[Table]) -> str:
    n = len(tables[0].section.rows) if tables else 0
    noun = tables[0].noun if tables else "rows"
    return ('<div class="filter"><label>filter by name or op type <input id="filter" type="search" '
            'autocomplete="off" spellcheck="false"></label> '
            '<span id="selection" class="chip" hidden>selected from a chart: <span class="what"></span> '
            '<button type="button">show all</button></span> '
            f'<span id="row-count">{n} of {n} {esc(noun)}</span></div>')


def notes_html(lines: Sequence[str], element_id: str | None = None, cls: str = "notes") -> str:
    attr = f' id="{esc(element_id)}"' if element_id else ""
    return f'<ul{attr} class="{cls}">' + "".join(f"<li>{esc(line)}</li>" for line in lines) + "</ul>"


def facts_html(facts: Sequence[tuple[str, str]]) -> str:
    """Label/value pairs as a definition list."""
    return '<dl class="facts">' + "".join(f"<div><dt>{esc(k)}</dt><dd>{esc(v)}</dd></div>" for k, v in facts) + "</dl>"


def section_html(element_id: str, title: str, body: str, intro: str = "") -> str:
    p = f'<p class="intro">{esc(intro)}</p>' if intro else ""
    return f'<section id="{esc(element_id)}"><h2>{esc(title)}</h2>{p}{body}</section>'


def document(title: str, subtitle: str, sections: Sequence[str], tables: Sequence[Table],
             data: Mapping[str, Any]) -> str:
    """The whole page: sections (markup already escaped), the tables' data and the script."""
    # one script: the page's policy allows it by its hash
    script = asset("timeline.js") + asset("timeline_input.js") + asset("report.js")
    if "</script" in script.lower():  # our own file: a mistake there must not pass unseen
        raise ValueError("report.js must not contain </script")
    payload = {**data, "tables": {t.element_id: table_data(t) for t in tables}}
    # id and title come from the sections' own markup, escaped there already
    nav = "".join(f'<a href="#{m.group(1)}">{m.group(2)}</a>'
                  for s in sections if (m := re.match(r'<section id="([^"]+)"><h2>([^<]*)</h2>', s)))
    return "".join([
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">",
        f'<meta http-equiv="Content-Security-Policy" content="{esc(csp(script))}">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        '<meta name="referrer" content="no-referrer">',
        f"<title>{esc(title)}</title><style>{asset('report.css')}</style></head>\n<body>",
        f'<header><h1>{esc(title)}</h1><p class="sub">{esc(subtitle)}</p><nav>{nav}</nav></header>\n<main>',
        "\n".join(sections),
        '</main>\n<div id="tip" hidden></div>\n',
        json_block("report-data", payload),
        f"\n<script>{script}</script>\n</body></html>\n",
    ])
