"""The CSV format: a view's main table for programs, raw figures under their keys, and layers.csv.

Unknown figures are empty cells, never 0. Every figure is written whole: a float with every digit it
has (as Python's repr: the shortest text that reads back as the same number), an integer as one.
"""

from __future__ import annotations

import csv
import io
from typing import IO, TYPE_CHECKING, Any

import numpy as np

from layerperf.data.profile import Profile
from layerperf.renderers.view import Section, View
from layerperf.renderers.views.profile import layers_section

if TYPE_CHECKING:
    pass

NAME = "csv"
SUFFIX = ".csv"
FILENAME = "layers.csv"


def cell(value: Any) -> Any:
    if value is None:
        return ""
    if isinstance(value, np.floating | np.integer):  # a numpy scalar: as the Python number it holds
        return value.item()
    return value


def section_text(section: Section, lineterminator: str = "\n") -> str:
    keys = section.csv_keys()
    text = io.StringIO(newline="")
    out = csv.writer(text, lineterminator=lineterminator)
    out.writerow(keys)
    for row in section.rows:
        out.writerow([cell(row.get(k)) for k in keys])
    return text.getvalue()


def render(view: View) -> str:
    return section_text(view.sections[0])


def write(profile: Profile, f: IO[bytes]) -> None:
    """layers.csv: one row per layer, the columns of :data:`layerperf.data.table.COLUMNS`, then counters
    and metrics; CSV's own line ends (CRLF), as it has always been written."""

    f.write(section_text(layers_section(profile), lineterminator="\r\n").encode())
