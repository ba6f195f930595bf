"""The markdown format: each section a pipe table (title in bold above, notes below), for people.

Cells are formatted as in the terminal (units, ``?`` for unknown); numbers align right.
"""

from __future__ import annotations

from layerperf.renderers.view import Section, View

NAME = "markdown"
SUFFIX = ".md"


def escape(text: str) -> str:
    """A cell's text as Markdown shows it as it is: a pipe does not end the cell, and ``<``/``>`` open no
    HTML tag (a kernel's ``foo<float>`` would vanish, a name ``<script>`` would be markup)."""
    return (text.replace("\\", "\\\\").replace("|", "\\|").replace("<", "\\<").replace(">", "\\>")
            .replace("\n", " "))


def section_text(section: Section) -> str:
    cols = section.columns
    lines = [f"**{escape(section.title)}**", ""] if section.title else []
    lines.append("| " + " | ".join(escape(c.header) for c in cols) + " |")
    lines.append("| " + " | ".join("---:" if c.justify == "right" else ":---" for c in cols) + " |")
    for row in section.people_rows:
        lines.append("| " + " | ".join(escape(c.cell(row)) for c in cols) + " |")
    if section.notes:
        lines.append("")
        lines.extend(n.plain() for n in section.notes)
    return "\n".join(lines) + "\n"


def render(view: View) -> str:
    return "\n".join(section_text(s) for s in view.sections)
