"""The markdown format: each section a pipe table (title in bold above, notes below), for people.

Cells are formatted as in the terminal (units, ``?`` for unknown); numbers align right.
"""

from __future__ import annotations

import re

from layerperf.renderers.view import Section, View

NAME = "markdown"
SUFFIX = ".md"


# What Markdown would read as syntax in a name, escaped with a backslash (CommonMark's escapes); the rest is
# left as written, so that the file reads as plain text too: a pipe ends a cell; < and > open HTML tags (a
# kernel's foo<float> would vanish, a name <script> would be markup); * makes emphasis even inside a word (a
# C++ signature's pointers); _ only at a word's edge (__init__, not in_shapes); ` code; ]( a link; &name;
# an entity (a&lt;b would read a<b); a backslash escapes these itself.
_SYNTAX = re.compile(r"[\\|<>*`]|(?<![0-9A-Za-z])_|_(?![0-9A-Za-z])|\](?=\()|&(?=#?[0-9A-Za-z]+;)")


def escape(text: str) -> str:
    """Text as Markdown shows it as it is (see :data:`_SYNTAX`), a line break a space."""
    return _SYNTAX.sub(lambda m: "\\" + m.group(0), text).replace("\n", " ")


def section_text(section: Section) -> str:
    cols = section.columns
    lines = [f"**{escape(section.title)}**", ""] if section.title else []
    lines.append("| " + " | ".join(escape(c.header) for c in cols) + " |")
    lines.append("| " + " | ".join("---:" if c.justify == "right" else ":---" for c in cols) + " |")
    for row in section.people_rows:
        lines.append("| " + " | ".join(escape(c.cell(row)) for c in cols) + " |")
    if section.notes:
        lines.append("")
        lines.extend(escape(n.plain()) for n in section.notes)
    return "\n".join(lines) + "\n"


def render(view: View) -> str:
    return "\n".join(section_text(s) for s in view.sections)
