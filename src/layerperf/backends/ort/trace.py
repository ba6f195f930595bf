"""Parsing ONNX Runtime's own profiler output (``enable_profiling``) into node events per run.

The profiler writes a JSON array of Trace Event Format events. Per run it emits one ``model_run``
session event and one ``<node>_kernel_time`` node event per executed node (older releases add
``_fence_before``/``_fence_after`` events, which carry no kernel time and are skipped here).
The nodes of a Loop, If or Scan body are node events too, named as in their own graph and lying
within the parent's event; :mod:`layerperf.nesting` tells which parent each ran in.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from layerperf.nesting import CONTROL_FLOW_OPS, enclosing, open_order, qualify
from layerperf.tensor import TensorInfo, ort_type_to_dtype

KERNEL_SUFFIX = "_kernel_time"
MEMORY_KEYS = (
    "activation_size", "parameter_size", "output_size", "mem_bytes_requested_in_use", "mem_bytes_in_use",
    "mem_in_use_peak", "mem_arena_held", "mem_requested_in_use_delta", "mem_in_use_delta",
    "mem_arena_held_delta",
)


@dataclass(slots=True)
class NodeEvent:
    """One node call. ``name`` is the layer name: a body node's is qualified by its parent's
    (``loop::add``); ``node`` is the name in its own graph; ``parent`` the enclosing layer's name."""

    name: str
    op_type: str
    provider: str
    ts_us: int
    dur_us: int
    tid: int
    args: dict[str, Any]
    node: str = ""
    parent: str | None = None


@dataclass(slots=True)
class RunEvents:
    ts_us: int
    dur_us: int
    nodes: list[NodeEvent] = field(default_factory=list)
    events: int = 0  # every profiler event within the run (nodes, subgraph executions...)


def node_name(event_name: str) -> str:
    return event_name[: -len(KERNEL_SUFFIX)] if event_name.endswith(KERNEL_SUFFIX) else event_name


def is_kernel_event(ev: Any) -> bool:
    return (isinstance(ev, dict) and ev.get("cat") == "Node" and ev.get("ph") == "X"
            and str(ev.get("name", "")).endswith(KERNEL_SUFFIX))


def _node(ev: dict[str, Any]) -> NodeEvent:
    args = ev.get("args") or {}
    name = node_name(str(ev["name"]))
    return NodeEvent(name=name, op_type=str(args.get("op_name", "")), provider=str(args.get("provider", "")),
                     ts_us=int(ev["ts"]), dur_us=int(ev["dur"]), tid=int(ev.get("tid", 0)), args=args, node=name)


def split_runs(events: list[Any]) -> list[RunEvents]:
    """Group kernel events into runs by the ``model_run`` event whose extent holds them."""
    runs = sorted((RunEvents(int(e["ts"]), int(e["dur"])) for e in events
                   if isinstance(e, dict) and e.get("cat") == "Session" and e.get("name") == "model_run"),
                  key=lambda r: r.ts_us)
    starts = [r.ts_us for r in runs]
    for ev in events:
        i = _run_of(ev, runs, starts)
        if i is None:
            continue
        runs[i].events += 1
        if is_kernel_event(ev):
            runs[i].nodes.append(_node(ev))
    for run in runs:
        nest(run)
    return runs


def _run_of(ev: Any, runs: list[RunEvents], starts: list[int]) -> int | None:
    if not isinstance(ev, dict) or not isinstance(ev.get("ts"), int | float):
        return None
    ts = ev["ts"]
    i = bisect.bisect_right(starts, ts) - 1
    return i if i >= 0 and ts <= runs[i].ts_us + runs[i].dur_us else None


def nest(run: RunEvents) -> None:
    """Sort a run's node calls as they opened and qualify body nodes by the parent they ran in."""
    nodes = run.nodes
    tid, ts, dur = (np.asarray([getattr(n, f) for n in nodes], dtype=np.int64) for f in ("tid", "ts_us", "dur_us"))
    order = open_order(tid, ts, dur).tolist()
    run.nodes = [nodes[i] for i in order]
    flow = np.asarray([n.op_type in CONTROL_FLOW_OPS for n in run.nodes], dtype=bool)
    if not flow.any():
        return
    sorted_cols = (tid[order], ts[order], dur[order])
    parent = enclosing(*sorted_cols, flow).tolist()
    for i, p in enumerate(parent):  # a parent opens before its children: already qualified
        if p >= 0:
            node = run.nodes[i]
            node.parent = run.nodes[p].name
            node.name = qualify(node.parent, node.node)


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


def pool_workers(runs: Iterable[RunEvents]) -> int | None:
    """Distinct intra-op pool workers that ran part of a node, from the profiler's
    ``thread_scheduling_stats``; None when no event carries them (no pool, or an older release)."""
    seen: set[str] = set()
    stats_found = False
    for run in runs:
        for node in run.nodes:
            stats = node.args.get("thread_scheduling_stats")
            if isinstance(stats, dict):
                stats_found = True
                subs = stats.get("sub_threads")
                if isinstance(subs, dict):
                    seen.update(str(k) for k in subs)
    return len(seen) if stats_found else None
