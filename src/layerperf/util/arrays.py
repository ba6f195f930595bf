"""Small numpy helpers shared by the table and its readers."""

from __future__ import annotations

import numpy as np


def dense(key: np.ndarray) -> np.ndarray:
    """``key``'s values numbered 0, 1, ... in their sorted order (``np.unique``'s inverse): by a table of
    the values present where they span no more than a few times the rows, else by sorting."""
    key = np.asarray(key).astype(np.int64, copy=False)  # bool keys too (as an index they would be a mask)
    if not key.size:
        return key
    low, high = int(key.min()), int(key.max())
    if low < 0 or high >= 4 * key.size + 1024:
        return np.unique(key, return_inverse=True)[1].reshape(-1).astype(np.int64)
    present = np.zeros(high + 1, dtype=bool)
    present[key] = True
    return (np.cumsum(present, dtype=np.int64) - 1)[key]
