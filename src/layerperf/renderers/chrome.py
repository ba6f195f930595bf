"""trace.json: Chrome Trace Event Format (JSON object form), readable by Perfetto UI and chrome://tracing.

Every layer call of every measured run is a complete event (``"ph": "X"``); runs are X events on
the same thread one level up; counters are counter tracks (``"ph": "C"``). Everything needed to
reload the Profile is under ``otherData`` (see :mod:`layerperf.data.codec`).
"""

from __future__ import annotations

from typing import IO, TYPE_CHECKING, Any

import orjson

from layerperf.analysis.summary import summary
from layerperf.data.codec import FORMAT_KEY, TRACE_FILENAME, layer_to_json
from layerperf.data.profile import Layer, Profile
from layerperf.data.table import counter_labels

if TYPE_CHECKING:
    pass

FILENAME = TRACE_FILENAME


def _us(ns: int) -> float:
    # Trace Event Format times are µs; three decimals keep ns resolution for the reload.
    return round(ns / 1e3, 3)


def _layer_args(layer: Layer, index: int) -> dict[str, Any]:
    args: dict[str, Any] = {
        "layer": index, "op_type": layer.op_type, "provider": layer.provider,
        "in_shapes": layer.in_shapes, "out_shapes": layer.out_shapes,
        "flops": layer.flops if layer.flops is not None else "unknown", "bytes": layer.bytes,
        "int_ops": layer.int_ops if layer.int_ops is not None else "unknown",
    }
    if layer.padded:  # the shapes above are as stored; these are the model's, and the padded work
        args.update(real_in_shapes=layer.real_in_shapes, real_out_shapes=layer.real_out_shapes,
                    padded_flops=layer.flops_as_stored)
    for label, values in layer.counters.items():
        if values:
            args[label] = sorted(values)[len(values) // 2]
    if layer.parent is not None:  # a body node: its span lies within its parent's, on the same thread
        args["parent"] = layer.parent
    return args


def _metadata_events(profile: Profile, pid: int, tids: set[int]) -> list[dict[str, Any]]:
    meta = profile.metadata
    title = f"layerperf: {meta.model.name} ({meta.backend or ''})"
    events: list[dict[str, Any]] = [
        {"ph": "M", "name": "process_name", "pid": pid, "tid": 0, "args": {"name": title}}]
    for i, tid in enumerate(sorted(tids)):
        name = "inference" if i == 0 else f"worker {tid}"
        events.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": tid, "args": {"name": name}})
    return events


def _span_events(profile: Profile, pid: int) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = []
    args = [_layer_args(layer, i) for i, layer in enumerate(profile.layers)]
    main_tid = profile.runs[0].spans[0].tid if profile.runs and profile.runs[0].spans else 0
    for r, run in enumerate(profile.runs):
        events.append({"ph": "X", "cat": "run", "name": f"run {r}", "pid": pid, "tid": main_tid,
                       "ts": _us(run.start_ns), "dur": _us(run.dur_ns), "args": {"run": r}})
        for span in run.spans:
            events.append({"ph": "X", "cat": "layer", "name": profile.layers[span.layer].name, "pid": pid,
                           "tid": span.tid, "ts": _us(span.start_ns), "dur": _us(span.dur_ns),
                           "args": {**args[span.layer], "run": r}})
    return events


def _counter_events(profile: Profile, pid: int) -> list[dict[str, Any]]:
    """One counter track per label: each layer's median count, stepped at its first measured call."""
    events: list[dict[str, Any]] = []
    if not profile.runs:
        return events
    first = {s.layer: s for s in reversed(profile.runs[0].spans)}
    for label in counter_labels(profile):
        for i, layer in enumerate(profile.layers):
            values = layer.counters.get(label)
            if values and i in first:
                events.append({"ph": "C", "name": label, "pid": pid, "ts": _us(first[i].start_ns),
                               "args": {label: sorted(values)[len(values) // 2]}})
    return events


def _memory_counter_events(profile: Profile, pid: int) -> list[dict[str, Any]]:
    """Memory counter tracks from the memory report, stepped at each layer's first measured call:
    live tensor bytes, the arena in use, and resident memory sampled in a fresh session's first run."""
    mem = profile.memory.to_json() if profile.memory is not None else None
    if mem is None or not profile.runs:
        return []
    first = {s.layer: s for s in reversed(profile.runs[0].spans)}
    events: list[dict[str, Any]] = []

    def counter(name: str, layer: int, value: Any, at_end: bool = False) -> None:
        span = first.get(layer)
        if span is not None and value is not None:
            ts = _us(span.start_ns + (span.dur_ns if at_end else 0))
            events.append({"ph": "C", "name": name, "pid": pid, "ts": ts, "args": {"bytes": value}})

    for k, node in enumerate(mem.get("nodes", [])):
        counter("live tensor bytes", k, node.get("live_bytes"))
        counter("arena in use bytes", k, (node.get("arena") or {}).get("mem_bytes_in_use"))
    for sample in (mem.get("runtime") or {}).get("rss_samples", []):
        if sample.get("run") == 0:
            counter("resident bytes (first run)", int(sample["node"]), sample.get("rss_bytes"), at_end=True)
    return events


def to_json(profile: Profile) -> dict[str, Any]:
    pid = profile.metadata.pid if profile.metadata.pid is not None else 1
    tids = {s.tid for run in profile.runs for s in run.spans}
    events = _metadata_events(profile, pid, tids) + _span_events(profile, pid) + _counter_events(profile, pid)
    events += _memory_counter_events(profile, pid)
    return {
        "traceEvents": events,
        "displayTimeUnit": "ms",
        "otherData": {
            FORMAT_KEY: 1,
            "layerperf": {
                "metadata": profile.metadata.to_json(),
                "layers": [layer_to_json(layer) for layer in profile.layers],
                "aggregates": profile.table(),
                "latency_ns": profile.latency_ns,
                "extra": profile.extra,
                # derived, for a reader of the file (overhead, per-event cost, warnings); not read back
                "summary": summary(profile),
            },
        },
    }


def write(profile: Profile, f: IO[bytes]) -> None:
    f.write(orjson.dumps(to_json(profile), option=orjson.OPT_SERIALIZE_NUMPY))
