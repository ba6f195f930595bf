"""Parsing ONNX Runtime's own profiler output (``enable_profiling``) into node events per run.

The profiler writes a JSON array of Trace Event Format events. Per run it emits one ``model_run``
session event and one ``<node>_kernel_time`` node event per executed node (older releases add
``_fence_before``/``_fence_after`` events, which carry no kernel time and are skipped here).
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field
from typing import Any

from layerperf.tensor import TensorInfo, ort_type_to_dtype

KERNEL_SUFFIX = "_kernel_time"
MEMORY_KEYS = (
    "activation_size", "parameter_size", "output_size", "mem_bytes_requested_in_use", "mem_bytes_in_use",
    "mem_in_use_peak", "mem_arena_held", "mem_requested_in_use_delta", "mem_in_use_delta",
    "mem_arena_held_delta",
)


@dataclass(slots=True)
class NodeEvent:
    name: str
    op_type: str
    provider: str
    ts_us: int
    dur_us: int
    tid: int
    args: dict[str, Any]


@dataclass(slots=True)
class RunEvents:
    ts_us: int
    dur_us: int
    nodes: list[NodeEvent] = field(default_factory=list)


def node_name(event_name: str) -> str:
    return event_name[: -len(KERNEL_SUFFIX)] if event_name.endswith(KERNEL_SUFFIX) else event_name


def is_kernel_event(ev: Any) -> bool:
    return (isinstance(ev, dict) and ev.get("cat") == "Node" and ev.get("ph") == "X"
            and str(ev.get("name", "")).endswith(KERNEL_SUFFIX))


def _node(ev: dict[str, Any]) -> NodeEvent:
    args = ev.get("args") or {}
    return NodeEvent(name=node_name(str(ev["name"])), op_type=str(args.get("op_name", "")),
                     provider=str(args.get("provider", "")), ts_us=int(ev["ts"]), dur_us=int(ev["dur"]),
                     tid=int(ev.get("tid", 0)), args=args)


def split_runs(events: list[Any]) -> list[RunEvents]:
    """Group kernel events into runs by the ``model_run`` event whose extent holds them."""
    runs = sorted((RunEvents(int(e["ts"]), int(e["dur"])) for e in events
                   if isinstance(e, dict) and e.get("cat") == "Session" and e.get("name") == "model_run"),
                  key=lambda r: r.ts_us)
    starts = [r.ts_us for r in runs]
    for ev in events:
        if not is_kernel_event(ev):
            continue
        node = _node(ev)
        i = bisect.bisect_right(starts, node.ts_us) - 1
        if i >= 0 and node.ts_us <= runs[i].ts_us + runs[i].dur_us:
            runs[i].nodes.append(node)
    for run in runs:
        run.nodes.sort(key=lambda n: n.ts_us)
    return runs


def tensor_infos(shapes: Any, names: list[str],
                 known: dict[str, TensorInfo] | None = None) -> tuple[TensorInfo | None, ...]:
    """Pair the profiler's ``input_type_shape`` list with the node's input names.

    The profiler lists only inputs it still sees at run time: an omitted optional input has the
    empty name in the graph, and a weight a kernel pre-packed is left out. So positions are restored
    by walking the names: a ``known`` tensor (an initializer) takes its own shape and consumes the
    profiler's entry only when that entry matches it.
    """
    known = known or {}
    listed = [(ort_type_to_dtype(k), tuple(v)) for item in shapes or [] for k, v in item.items()]
    if not names:
        return tuple(TensorInfo("", shape, dtype) for dtype, shape in listed)
    out: list[TensorInfo | None] = []
    pos = 0
    for name in names:
        if name in known:
            t = known[name]
            if pos < len(listed) and listed[pos][1] == t.shape:
                pos += 1
            out.append(t)
        elif name == "" or pos >= len(listed):
            out.append(None)
        else:
            dtype, shape = listed[pos]
            pos += 1
            out.append(TensorInfo(name, shape, dtype))
    return tuple(out)


def memory_figures(args: dict[str, Any]) -> dict[str, int]:
    out: dict[str, int] = {}
    for key in MEMORY_KEYS:
        if key in args:
            try:
                out[key] = int(args[key])
            except (TypeError, ValueError):
                continue
    return out
