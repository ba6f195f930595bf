"""layers.csv: one row per layer: the columns of :data:`layerperf.figures.COLUMNS`, then counters and metrics."""

from __future__ import annotations

import csv
import io
from typing import IO, TYPE_CHECKING, Any

from layerperf.figures import COLUMNS, extra_columns

if TYPE_CHECKING:
    from layerperf.profile_data import Profile

FILENAME = "layers.csv"


def _cell(value: Any) -> Any:
    # Unknown figures are empty cells, never 0.
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:.6g}"
    return value


def write(profile: Profile, f: IO[bytes]) -> None:
    header = list(COLUMNS) + extra_columns(profile)
    text = io.StringIO(newline="")
    out = csv.writer(text)
    out.writerow(header)
    for row in profile.table():
        out.writerow([_cell(row.get(col)) for col in header])
    f.write(text.getvalue().encode())
