"""The CSV format: a view's main table for programs, raw figures under their keys, and layers.csv.

Unknown figures are empty cells, never 0. Floats are written with the section's ``float_format``
(6 significant digits unless it says every digit).
"""

from __future__ import annotations

import csv
import io
from typing import IO, TYPE_CHECKING, Any

from layerperf.data.profile import Profile
from layerperf.renderers.view import Section, View
from layerperf.renderers.views.profile import layers_section

if TYPE_CHECKING:
    pass

NAME = "csv"
SUFFIX = ".csv"
FILENAME = "layers.csv"


def cell(value: Any, float_format: str | None = ".6g") -> Any:
    if value is None:
        return ""
    if float_format is not None and isinstance(value, float):
        return format(value, float_format)
    return value


def section_text(section: Section, lineterminator: str = "\n") -> str:
    keys = section.csv_keys()
    text = io.StringIO(newline="")
    out = csv.writer(text, lineterminator=lineterminator)
    out.writerow(keys)
    for row in section.rows:
        out.writerow([cell(row.get(k), section.float_format) for k in keys])
    return text.getvalue()


def render(view: View) -> str:
    return section_text(view.sections[0])


def write(profile: Profile, f: IO[bytes]) -> None:
    """layers.csv: one row per layer, the columns of :data:`layerperf.data.table.COLUMNS`, then counters
    and metrics; CSV's own line ends (CRLF), as it has always been written."""

    f.write(section_text(layers_section(profile), lineterminator="\r\n").encode())
