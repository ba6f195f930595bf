"""Small numpy helpers shared by the table and its readers."""

from __future__ import annotations

import numpy as np


def grown(values: np.ndarray, size: int, fill: float = 0) -> np.ndarray:
    """A new array of ``size``: ``values``, then ``fill`` (per-group columns that grow as groups come)."""
    out = np.full(size, fill, dtype=values.dtype)
    out[:values.size] = values
    return out


def dense(key: np.ndarray) -> np.ndarray:
    """``key``'s values numbered 0, 1, ... in their sorted order (``np.unique``'s inverse): by a table of
    the values present where they span no more than a few times the rows, else by sorting."""
    return unique_inverse(key)[1]


def unique_inverse(key: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``np.unique(key, return_inverse=True)`` for integer keys (the distinct values, sorted, and each key's
    number among them), by a table of the values present where they span no more than a few times the rows."""
    key = np.asarray(key).astype(np.int64, copy=False)  # bool keys too (as an index they would be a mask)
    if not key.size:
        return key, key
    low, high = int(key.min()), int(key.max())
    if low < 0 or high >= 4 * key.size + 1024:
        values, inverse = np.unique(key, return_inverse=True)
        return values, inverse.reshape(-1).astype(np.int64)
    present = np.zeros(high + 1, dtype=bool)
    present[key] = True
    return np.flatnonzero(present), (np.cumsum(present, dtype=np.int64) - 1)[key]


class PartMaps:
    """Per part, a map from the part's own codes to merged ones, applied to records of every part in one
    gather (not one masked pass per part: a trace read in many stretches has dozens of parts)."""

    def __init__(self, maps: list[np.ndarray], which: list[int] | None = None) -> None:
        """``which``: per part, the index of its map in ``maps`` (parts read by one process share its map);
        None: a map per part."""
        sizes = [m.size for m in maps]
        starts = np.concatenate([[0], np.cumsum(sizes, dtype=np.int64)[:-1]]).astype(np.int64)
        pick = np.arange(len(maps), dtype=np.int64) if which is None else np.asarray(which, dtype=np.int64)
        self.size = np.asarray(sizes, dtype=np.int64)[pick]
        self.offset = starts[pick]
        self.flat = np.concatenate(maps).astype(np.int64) if sum(sizes) else np.zeros(0, dtype=np.int64)

    def __call__(self, part: np.ndarray, code: np.ndarray) -> np.ndarray:
        """Each record's code in the merged numbering (``part``: its part); a negative code (none) stays."""
        code = np.asarray(code).astype(np.int64)  # a copy: the caller's column is left as it was
        known = code >= 0
        if known.any():
            part = np.asarray(part)[known].astype(np.int64)
            if (code[known] >= self.size[part]).any():  # a code its part never gave: a reading gone wrong
                raise ValueError("a record's code is beyond its part's map")
            code[known] = self.flat[self.offset[part] + code[known]]
        return code
