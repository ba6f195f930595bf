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
    from layerperf.data.layer import Layer, Span

# ONNX's control-flow ops and ONNX Runtime's contrib ops that run subgraphs.
CONTROL_FLOW_OPS = frozenset(("Loop", "If", "Scan", "BeamSearch", "GreedySearch", "WhisperBeamSearch", "Sampling"))
SEP = "::"


def qualify(parent_name: str, name: str) -> str:
    """A body node's layer name: its parent layer's name, ``::``, its own name."""
    return f"{parent_name}{SEP}{name}"


def open_order(thread: np.ndarray, start: np.ndarray, dur: np.ndarray) -> np.ndarray:
    """Events sorted as they open: by thread, then start.

    At one start (the same µs), a zero-length event comes first. A sibling that ended in the µs
    where the next event began must have zero length; a child that began in its parent's first µs
    may have either. So an event with a length there is a child, and a zero-length one is taken for
    the sibling (the likelier: a parent does its own work before its body starts). Then the longer
    first, so an enclosing event precedes what it encloses; then file order.
    """
    n = start.size
    return np.lexsort((np.arange(n), -dur, dur != 0, start, thread))


def enclosing(thread: np.ndarray, start: np.ndarray, dur: np.ndarray, can_enclose: np.ndarray) -> np.ndarray:
    """Index of the event each event is directly nested in, -1 for none.

    An event's parent is the last ``can_enclose`` event on its thread to open before it
    (:func:`open_order`) that had not ended when it started (``start < parent end``: an event that
    starts as another ends follows it). A child may end up to 1 µs past its parent's end (both
    truncated), so only the start decides.

    Numpy work throughout: "the last earlier candidate whose end is past this start" is found for
    every event at once by binary lifting over a table of block maxima of the candidates' ends.
    """
    n = start.size
    parent = np.full(n, -1, dtype=np.int64)
    if n == 0 or not can_enclose.any():
        return parent
    order = open_order(thread, start, dur)
    flags = can_enclose[order]
    cand = order[flags]  # candidates in open order (so grouped by thread)
    before = np.empty(n, dtype=np.int64)  # candidates strictly before each event, in open order
    before[order] = np.cumsum(flags) - flags
    lowest = np.searchsorted(thread[cand], thread, side="left")  # first candidate on the event's thread
    ends = (start + dur)[cand]
    # mostly the nearest earlier candidate is the parent (a body node in its loop): settle those first
    last = np.maximum(before - 1, 0)
    direct = (before > lowest) & (ends[last] > start)
    parent[direct] = cand[last[direct]]
    rest = np.flatnonzero(~direct & (before > lowest))
    if rest.size:
        pos = _skip_ended(before[rest], lowest[rest], start[rest], ends)
        parent[rest] = np.where(pos > lowest[rest], cand[np.maximum(pos - 1, 0)], -1)
    return parent


def _skip_ended(pos: np.ndarray, lowest: np.ndarray, at: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """From each ``pos``, step left over candidates that ended by ``at`` (never below ``lowest``):
    the candidate just left of the result is the last one still open."""
    maxima = [ends]  # maxima[k][j] = max(ends[j : j + 2**k])
    while 1 << len(maxima) <= ends.size:
        half = 1 << (len(maxima) - 1)
        maxima.append(np.maximum(maxima[-1][:-half], maxima[-1][half:]))
    pos = pos.copy()
    for k in range(len(maxima) - 1, -1, -1):
        width = 1 << k
        left = pos - width
        ok = left >= lowest
        block = maxima[k][np.where(ok, left, 0)]
        pos = np.where(ok & (block <= at), left, pos)
    return pos


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
    """Each event's duration minus its direct children's (>= 0).

    A child that ends past its parent's end (µs truncation: by 1 µs at most) is cut at that end,
    outermost first, so no nanosecond is counted twice: not in the parent, nor in the child and
    in what follows the parent.
    """
    child = np.flatnonzero(parent >= 0)
    if child.size:
        end = end.copy()
        depth = depths(parent)
        for d in range(1, int(depth.max()) + 1):
            rows = np.flatnonzero(depth == d)
            end[rows] = np.maximum(np.minimum(end[rows], end[parent[rows]]), start[rows])
    p = parent[child]
    inner = np.bincount(p, weights=(end[child] - start[child]).astype(np.float64), minlength=start.size)
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


def span_nesting(layers: Sequence[Layer], spans: Sequence[Span], dur_ns: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each span's enclosing span (-1 for none) and self time (ns, int64), for the spans of a Profile:
    spans of control-flow layers lose the spans of their body layers (``Layer.parent``) nested in
    them, found by :func:`enclosing`."""
    index = {layer.name: i for i, layer in enumerate(layers)}
    up = np.asarray([index.get(layer.parent, -1) if layer.parent is not None else -1 for layer in layers],
                    dtype=np.int64)
    if not (up >= 0).any():
        return np.full(len(spans), -1, dtype=np.int64), dur_ns.copy()
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
    return parent, np.rint(self_times(parent, start, start + dur_ns)).astype(np.int64)


def outermost(values: np.ndarray, parent: np.ndarray) -> np.ndarray:
    """``values`` (one per event, NaN unknown) with NaN wherever an enclosing event (``parent`` chain, -1 at
    the top) has a known value: the work of a call is counted on the outermost call that has it, not again
    on the calls it dispatches to (a PyTorch trace's ``aten::conv2d`` and its ``aten::convolution``)."""
    known = ~np.isnan(values)
    covered = np.zeros(values.size, dtype=bool)
    at = parent.copy()
    while (live := at >= 0).any():
        covered[live] |= known[at[live]]
        at[live] = parent[at[live]]
    return np.where(covered, np.nan, values)
