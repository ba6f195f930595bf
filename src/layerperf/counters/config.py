"""The perf config file of ONNX Runtime's per-layer perf fork: {"event string": "label", ...}."""

from __future__ import annotations

import json
from pathlib import Path

from layerperf.errors import InputError


def parse_perf_config(path: str | Path) -> dict[str, str]:
    """Read a JSON object mapping event strings to labels, e.g. {"perf::PERF_COUNT_HW_CPU_CYCLES": "cycles"}.

    Returns {event: label} in file order. A missing or unreadable file, bad JSON, a value that is not
    a non-empty string, or a label used twice raises InputError naming the file. The events are not
    resolved here (see resolve()).
    """
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"{path}: cannot read perf config: {exc}") from None
    try:
        data = json.loads(text, object_pairs_hook=lambda pairs: _no_duplicates(path, pairs))
    except json.JSONDecodeError as exc:
        raise InputError(
            f"{path}: perf config is not valid JSON ({exc.msg} at line {exc.lineno}, column {exc.colno})"
        ) from None
    return _validate(path, data)


def _no_duplicates(path: Path, pairs: list[tuple[str, object]]) -> dict[str, object]:
    # json.loads keeps the last of repeated keys silently; a repeated event is a mistake worth naming.
    out: dict[str, object] = {}
    for key, value in pairs:
        if key in out:
            raise InputError(f"{path}: perf config lists event {key!r} twice")
        out[key] = value
    return out


def _validate(path: Path, data: object) -> dict[str, str]:
    example = 'expected an object like {"perf::PERF_COUNT_HW_CPU_CYCLES": "cycles"}'
    if not isinstance(data, dict):
        raise InputError(f"{path}: perf config must be a JSON object, not {type(data).__name__}", example)
    if not data:
        raise InputError(f"{path}: perf config names no events", example)
    seen: dict[str, str] = {}
    for event, label in data.items():
        if not event.strip():
            raise InputError(f"{path}: perf config has an empty event string", example)
        if not isinstance(label, str) or not label.strip():
            raise InputError(f"{path}: the label of {event!r} must be a non-empty string", example)
        if label in seen:
            raise InputError(f"{path}: label {label!r} is used for both {seen[label]!r} and {event!r}")
        seen[label] = event
    return dict(data)
