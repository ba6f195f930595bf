"""Where layerperf keeps what it can rebuild: ``$LAYERPERF_CACHE``, or ``~/.cache/layerperf``."""

from __future__ import annotations

import os
from pathlib import Path

ENV = "LAYERPERF_CACHE"


def cache_root() -> Path:
    """``$LAYERPERF_CACHE``, or ``~/.cache/layerperf`` when the variable is unset or empty."""
    root = os.environ.get(ENV) or os.path.join("~", ".cache", "layerperf")
    return Path(root).expanduser()


def cache_subdir(name: str) -> Path:
    """One kind of cached file's folder under :func:`cache_root` (not created)."""
    return cache_root() / name
