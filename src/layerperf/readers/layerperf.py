"""Load a layerperf trace.json back into a Profile."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any

from layerperf.data.codec import TRACE_FILENAME, check_version, layer_from_json, sections_from_json
from layerperf.data.metadata import Metadata
from layerperf.data.profile import Profile, Run, Span
from layerperf.errors import InputError
from layerperf.readers.stream import load_json


def resolve_path(path: Path) -> Path:
    """A profile directory stands for the trace.json inside it (or, gzipped, trace.json.gz)."""
    if path.is_dir():
        for trace in (path / TRACE_FILENAME, path / f"{TRACE_FILENAME}.gz"):
            if trace.exists():
                return trace
        raise InputError(f"{path} holds no {TRACE_FILENAME} (nor {TRACE_FILENAME}.gz)")
    return path


def is_layerperf(doc: Any) -> bool:
    return isinstance(doc, dict) and isinstance(doc.get("otherData"), dict) and \
        "layerperf_format" in doc["otherData"]


def _ns(us: Any) -> int:
    return round(float(us) * 1000)


def _runs(events: list[Any], n_layers: int, source: str) -> list[Run]:
    extents: dict[int, tuple[int, int]] = {}
    spans: dict[int, list[Span]] = defaultdict(list)
    for ev in events:
        if not isinstance(ev, dict) or ev.get("ph") != "X":
            continue
        args = ev.get("args") or {}
        if ev.get("cat") == "run":
            extents[int(args["run"])] = (_ns(ev["ts"]), _ns(ev["dur"]))
        elif ev.get("cat") == "layer":
            layer = int(args["layer"])
            if not 0 <= layer < n_layers:
                raise InputError(f"{source}: event refers to layer {layer}, which is not in otherData")
            spans[int(args["run"])].append(Span(layer, _ns(ev["ts"]), _ns(ev["dur"]), int(ev["tid"])))
    return [Run(*extents[r], spans=spans.get(r, [])) for r in sorted(extents)]


def profile_from_doc(doc: dict[str, Any], source: str) -> Profile:
    other = doc["otherData"]
    check_version(other, source)
    body = other.get("layerperf") or {}
    try:
        metadata = Metadata.from_json(body.get("metadata") or {})
        layers = [layer_from_json(d) for d in body.get("layers", [])]
        runs = _runs(doc.get("traceEvents") or [], len(layers), source)
    except (KeyError, TypeError, ValueError) as exc:
        raise InputError(f"{source} is a damaged layerperf trace ({type(exc).__name__}: {exc})") from None
    return Profile(metadata=metadata, layers=layers, runs=runs,
                   latency_ns=[int(x) for x in body.get("latency_ns", [])],
                   **sections_from_json(body.get("extra") or {}))


def load_profile(path: Path) -> Profile:
    trace = resolve_path(path)
    doc = load_json(trace)
    if not is_layerperf(doc):
        raise InputError(f"{trace} is not a layerperf trace (no otherData.layerperf_format)")
    return profile_from_doc(doc, str(trace))
