"""Which node calls ran inside which: the body of a control-flow node nested in the node's span.

ONNX Runtime's profiler records the nodes of a Loop, If or Scan body as node events of their own,
on the thread that runs the parent node and within the parent's ``ts .. ts + dur``; the parent's
event covers its whole body. So a parent's *self* time is its duration minus its direct children's,
and a body node's name is qualified by its parent's (``loop::add``): body names are unique only
within their own graph, and the same body node under two parents is two layers.

The profiler's times are whole µs, truncated, which makes touching spans ambiguous; the rules
here settle them the way the runtime can produce them (see :func:`open_order`). Only events of
control-flow op types may enclose others: a plain kernel never runs nodes inside it, and letting
any span enclose would let a zero-length kernel that ends in the µs where the next one starts
pass for its child.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from layerperf.data import Layer, Span

# ONNX's control-flow ops and ONNX Runtime's contrib ops that run subgraphs.
CONTROL_FLOW_OPS = frozenset(("Loop", "If", "Scan", "BeamSearch", "GreedySearch", "WhisperBeamSearch", "Sampling"))
SEP = "::"


def qualify(parent_name: str, name: str) -> str:
    """A body node's layer name: its parent layer's name, ``::``, its own name."""
    return f"{parent_name}{SEP}{name}"


def open_order(thread: np.ndarray, start: np.ndarray, dur: np.ndarray) -> np.ndarray:
    """Events sorted as they open: by thread, then start.

    At one start (same µs), a zero-length event comes first: had it been a child it would have
    begun after its parent, so it is the sibling that ended as the next one began (a child starting
    in its parent's first µs has a length, or it is a sibling — zero length proves nothing more).
    Then the longer first, so an enclosing event precedes what it encloses; then file order.
    """
    n = start.size
    return np.lexsort((np.arange(n), -dur, dur != 0, start, thread))


def enclosing(thread: np.ndarray, start: np.ndarray, dur: np.ndarray, can_enclose: np.ndarray) -> np.ndarray:
    """Index of the event each event is directly nested in, -1 for none.

    An event's parent is the innermost ``can_enclose`` event on its thread that opened before it
    (:func:`open_order`) and had not ended when it started (``start < parent end``: an event that
    starts as another ends follows it). A child may end up to 1 µs past its parent's end (both
    truncated), so only the start decides.
    """
    n = start.size
    parent = np.full(n, -1, dtype=np.int64)
    if n == 0 or not can_enclose.any():
        return parent
    end = start + dur
    order = open_order(thread, start, dur)
    # the nearest enclosing candidate strictly before each position, in open order
    cand_pos = np.where(can_enclose[order], np.arange(n), -1)
    before = np.concatenate([[-1], np.maximum.accumulate(cand_pos)[:-1]])
    first = np.full(n, -1, dtype=np.int64)
    first[order] = np.where(before >= 0, order[np.maximum(before, 0)], -1)
    # candidates' own parents first, in open order: climbing from the nearest candidate walks the
    # chain of candidates still open, innermost first (what a stack of open spans would hold)
    for e in order[can_enclose[order]].tolist():
        parent[e] = _climb(first[e], e, parent, thread, start, end)
    rest = np.flatnonzero(~can_enclose)
    parent[rest] = _climb_all(first[rest], rest, parent, thread, start, end)
    return parent


def _holds(p: int, e: int, thread: np.ndarray, start: np.ndarray, end: np.ndarray) -> bool:
    return bool(thread[p] == thread[e] and start[e] < end[p])


def _climb(c: int, e: int, parent: np.ndarray, thread: np.ndarray, start: np.ndarray, end: np.ndarray) -> int:
    while c >= 0 and not _holds(c, e, thread, start, end):
        c = int(parent[c])
    return c


def _climb_all(cand: np.ndarray, events: np.ndarray, parent: np.ndarray, thread: np.ndarray,
               start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """:func:`_climb` for many events at once: each step moves every unsettled one a level up."""
    cand = cand.copy()
    todo = np.flatnonzero(cand >= 0)
    while todo.size:
        c, e = cand[todo], events[todo]
        held = (thread[c] == thread[e]) & (start[e] < end[c])
        up = todo[~held]
        cand[up] = parent[cand[up]]
        todo = up[cand[up] >= 0]
    return cand


def depths(parent: np.ndarray) -> np.ndarray:
    """Nesting level of each event: 0 for top level."""
    depth = np.zeros(parent.size, dtype=np.int64)
    nested = parent >= 0
    while True:  # one pass per level; levels are few
        new = np.where(nested, depth[np.maximum(parent, 0)] + 1, 0)
        if np.array_equal(new, depth):
            return depth
        depth = new


def self_times(parent: np.ndarray, start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Each event's duration minus the part of each direct child that lies inside it (>= 0).

    A child that spills past its parent's end (µs truncation) takes only its overlap, so no
    nanosecond is subtracted that the parent did not hold.
    """
    child = np.flatnonzero(parent >= 0)
    p = parent[child]
    overlap = np.clip(np.minimum(end[child], end[p]) - start[child], 0, None)
    inner = np.bincount(p, weights=overlap.astype(np.float64), minlength=start.size)
    return np.clip((end - start) - inner, 0, None)


def body_sums(parent: np.ndarray, values: np.ndarray, is_parent: np.ndarray) -> np.ndarray:
    """``values`` with each ``is_parent`` event's replaced by the sum over its direct children,
    innermost first (so a nested parent counts its own body); NaN when a child's is NaN or when
    no child was recorded (an unknown is never a silent 0)."""
    out = np.asarray(values, dtype=np.float64).copy()
    depth = depths(parent)
    acc = np.zeros(out.size)
    kids = np.zeros(out.size, dtype=np.int64)
    for d in range(int(depth.max(initial=0)), -1, -1):
        level = depth == d
        done = level & is_parent
        out[done] = np.where(kids[done] > 0, acc[done], np.nan)
        child = np.flatnonzero(level & (parent >= 0))
        np.add.at(acc, parent[child], out[child])
        np.add.at(kids, parent[child], 1)
    return out


def span_self_ns(layers: Sequence[Layer], spans: Sequence[Span], dur_ns: np.ndarray) -> np.ndarray:
    """Self time (ns, int64) of each span of a Profile: spans of control-flow layers lose the spans
    of their body layers (``Layer.parent``) nested in them, found by :func:`enclosing`."""
    index = {layer.name: i for i, layer in enumerate(layers)}
    up = np.asarray([index.get(layer.parent, -1) if layer.parent is not None else -1 for layer in layers],
                    dtype=np.int64)
    if not (up >= 0).any():
        return dur_ns.copy()
    is_parent = np.zeros(len(layers), dtype=bool)
    is_parent[up[up >= 0]] = True
    layer = np.fromiter((s.layer for s in spans), dtype=np.int64, count=len(spans))
    start = np.fromiter((s.start_ns for s in spans), dtype=np.int64, count=len(spans))
    tid = np.fromiter((s.tid for s in spans), dtype=np.int64, count=len(spans))
    parent = enclosing(tid, start, dur_ns, is_parent[layer])
    # a span counts against the span it lies in only when that is its layer's parent's
    nested = parent >= 0
    nested[nested] = up[layer[nested]] == layer[parent[nested]]
    parent = np.where(nested, parent, -1)
    return np.rint(self_times(parent, start, start + dur_ns)).astype(np.int64)
