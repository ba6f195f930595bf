"""Reading a JSON or gzipped JSON file with one clear error for every way it can be wrong."""

from __future__ import annotations

import gzip
import zlib
from pathlib import Path
from typing import Any

import orjson

from layerperf.errors import InputError


def read_bytes(path: Path) -> bytes:
    """The file's bytes, gunzipped when it is gzip (by magic number, whatever the suffix)."""
    if path.is_dir():
        raise InputError(f"{path} is a directory, not a trace file")
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise InputError(f"no such file: {path}") from None
    except OSError as exc:
        raise InputError(f"cannot read {path}: {exc.strerror}") from exc
    if raw[:2] == b"\x1f\x8b":
        try:
            return gzip.decompress(raw)
        except (OSError, EOFError, zlib.error) as exc:
            raise InputError(f"{path} is not valid gzip: {exc}") from exc
    if path.suffix == ".gz":
        raise InputError(f"{path} is named .gz but is not gzip")
    return raw


def _position(text: bytes, pos: int) -> str:
    line = text.count(b"\n", 0, pos) + 1
    col = pos - (text.rfind(b"\n", 0, pos) + 1) + 1
    return f"line {line}, column {col}"


def load_json(path: Path) -> Any:
    """Parse a JSON (or .json.gz) file; malformed, empty or truncated input raises InputError."""
    raw = read_bytes(path)
    if not raw.strip():
        raise InputError(f"{path} is empty")
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise InputError(f"{path} is not valid JSON ({exc.msg} at {_position(raw, exc.pos)})") from None
