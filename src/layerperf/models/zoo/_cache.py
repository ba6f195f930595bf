"""On-disk cache of built zoo models: where files go, what they are called, how they are written."""

from __future__ import annotations

from pathlib import Path

from layerperf.util import atomic
from layerperf.util.cache import cache_subdir

# Bump whenever a builder changes what it emits, so stale cached files are never reused.
BUILDER_VERSION = 1


def cache_dir() -> Path:
    """``$LAYERPERF_CACHE/zoo``, or ``~/.cache/layerperf/zoo`` when the variable is unset or empty."""
    return cache_subdir("zoo")


def cache_file(name: str, batch: int, size_arg: str, size: int, seed: int) -> Path:
    """File for one build. Only the size argument the model uses is in the name, so
    ``path("resnet50", seq_len=64)`` and ``path("resnet50")`` share one file."""
    size_tag = f"{size}px" if size_arg == "image_size" else f"seq{size}"
    return cache_dir() / f"{name}_b{batch}_{size_tag}_seed{seed}_v{BUILDER_VERSION}.onnx"


def write_atomic(target: Path, data: bytes) -> None:
    """Write ``data`` to ``target`` through a temp file in the same folder and os.replace.

    Readers (and concurrent builders of the same model) see either no file or a complete one,
    never a half-written model.
    """
    target.parent.mkdir(parents=True, exist_ok=True)
    atomic.write_bytes(target, data, fsync=True)
