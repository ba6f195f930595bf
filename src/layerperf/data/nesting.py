"""Which calls ran inside which, on each thread: one rule for every timeline layerperf reads — a
Profile's spans, ONNX Runtime's profile, a PyTorch profiler trace, any Trace Event Format file.

A call's parent is the last call on its thread to open before it that had not ended when it started
(:func:`enclosing`; "open before" is :func:`open_order`: by start, the longer first). Its *self* time is
its duration less the part of each direct child inside it (:func:`self_times`; on exact clocks, less what
everything nested in it covers, each instant once).

Two kinds of clock need two small variations:

- exact times (a Trace Event Format trace, PyTorch's in ns): a zero-length call that starts with a
  longer one is inside it; a call is inside another only if it also ends by the other's end, give or take
  :data:`EXACT_REACH_NS` (a producer's rounding) — two calls that overlap by a rounding nanosecond
  and then go on are siblings, not parent and child, so what runs in the second is not counted inside the
  first. A PyTorch trace's runtime calls are exempt (:func:`op_reach`: Kineto times them by another clock
  than the ops around them; only their start decides). A child that ends past its parent's end keeps its
  own duration: its parent loses the overlap, and the part past the parent's end is taken from the
  events around the parent (:func:`self_times`: an event's self time is the part of its span that nothing
  nested in it covers);
- ONNX Runtime's profiler, whose times are whole µs, truncated, which makes touching spans ambiguous:
  the body of a control-flow node (Loop, If, Scan) is node events of its own on the thread that runs the
  parent, within the parent's ``ts .. ts + dur``. Only events of control-flow op types may enclose others
  (a plain kernel never runs nodes inside it, and letting any span enclose would let a zero-length
  kernel that ends in the µs where the next one starts pass for its child); a zero-length event at a
  start is the sibling (:func:`open_order`), and a child that ends past its parent's end (by 1 µs at
  most) is cut at that end. A body node's name is qualified by its parent's (``loop::add``): body names
  are unique only within their own graph, and the same body node under two parents is two layers.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from layerperf.data.layer import Layer, Span

# ONNX's control-flow ops and ONNX Runtime's contrib ops that run subgraphs.
CONTROL_FLOW_OPS = frozenset(("Loop", "If", "Scan", "BeamSearch", "GreedySearch", "WhisperBeamSearch", "Sampling"))
SEP = "::"
EXACT_REACH_NS = 1000.0  # how far past its parent's end a child of an exact clock may end (a µs producer's rounding)


def qualify(parent_name: str, name: str) -> str:
    """A body node's layer name: its parent layer's name, ``::``, its own name."""
    return f"{parent_name}{SEP}{name}"


def open_order(thread: np.ndarray, start: np.ndarray, dur: np.ndarray, *, zero_first: bool = True) -> np.ndarray:
    """Events sorted as they open: by thread, then start, then the longer first (so an enclosing event
    precedes what it encloses), then file order.

    ``zero_first`` (ONNX Runtime's truncated µs): at one start, a zero-length event comes first. A sibling
    that ended in the µs where the next event began must have zero length; a child that began in its
    parent's first µs may have either. So an event with a length there is a child, and a zero-length one
    is taken for the sibling (the likelier: a parent does its own work before its body starts).
    """
    if zero_first:
        return sort_by([thread, start, dur != 0, -dur])
    return sort_by([thread, start, -dur])


def sort_by(keys: Sequence[np.ndarray]) -> np.ndarray:
    """Indices that sort by ``keys``, most significant first, ties kept in index order (``np.lexsort``
    of the keys reversed, the same indices).

    By the first two keys over every row, then by the rest over only the rows that tie on those: each
    further key would cost a whole stable pass over every row, and in a timeline (thread, start) few tie.
    """
    head, rest = keys[:2], keys[2:]
    order = np.lexsort(head[::-1])
    if not rest or order.size < 2:
        return order
    tie = np.ones(order.size - 1, dtype=bool)
    for key in head:
        col = key[order]
        same = col[1:] == col[:-1]
        if col.dtype.kind in "fc":  # NaNs sort together, last, and tie as lexsort sees them
            same |= np.isnan(col[1:]) & np.isnan(col[:-1])
        tie &= same
    if not tie.any():
        return order
    # the positions of the tied rows, each tie numbered in order, and the tied rows sorted within their tie
    member = np.zeros(order.size, dtype=bool)
    member[:-1] |= tie
    member[1:] |= tie
    at = np.flatnonzero(member)
    opens = np.ones(at.size, dtype=bool)
    opens[1:] = ~tie[at[1:] - 1]
    tied = order[at]
    order[at] = tied[np.lexsort([key[tied] for key in reversed(rest)] + [np.cumsum(opens)])]
    return order


def enclosing(thread: np.ndarray, start: np.ndarray, dur: np.ndarray, can_enclose: np.ndarray | None = None, *,
              zero_first: bool = True, reach: float | np.ndarray | None = None) -> np.ndarray:
    """Index of the event each event is directly nested in, -1 for none.

    An event's parent is the last ``can_enclose`` event (every event, when None) on its thread to open
    before it (:func:`open_order`) that had not ended when it started (``start < parent end``: an event
    that starts as another ends follows it, and a zero-length event encloses nothing) and that it does not
    outlast by more than ``reach`` (``end <= parent end + reach``; one for all or one per event, ``np.inf``
    where only the start decides; None: only the start decides for every event).

    Numpy work throughout, every event at once: each event's guess starts at the nearest candidate
    opened before it; while the guess had ended when the event started, it moves to the guess's own
    guess. Every candidate skipped so had ended by then (it had ended by the guess's start, which is no
    later), so the first guess still open is the parent. Guesses jump along each other's, so the rounds
    are few (about log2 of the longest run of siblings, plus the nesting depth). With a ``reach``, a guess
    the event outlasts is skipped the same way: the candidates its own guess skipped had ended by its start
    or end before its end less its reach, so before the event's end less the event's (any reach >= 0).
    """
    n = start.size
    parent = np.full(n, -1, dtype=np.int64)
    flags_all = np.ones(n, dtype=bool) if can_enclose is None else can_enclose
    if n == 0 or not flags_all.any():
        return parent
    order = open_order(thread, start, dur, zero_first=zero_first)
    flags = flags_all[order]
    cand = order[flags]  # candidates in open order (so grouped by thread)
    before = np.empty(n, dtype=np.int64)  # candidates strictly before each event, in open order
    before[order] = np.cumsum(flags) - flags
    lowest = np.searchsorted(thread[cand], thread, side="left")  # first candidate on the event's thread
    ends = (start + dur)[cand]
    last = start + dur - (np.inf if reach is None else reach)  # the least end a parent can have
    guess = np.where(before > lowest, before - 1, -1)  # a position in cand, -1: none left
    todo = np.flatnonzero(guess >= 0)
    while todo.size:
        at = guess[todo]
        inside = (ends[at] > start[todo]) & (ends[at] >= last[todo])
        parent[todo[inside]] = cand[at[inside]]
        todo = todo[~inside]
        guess[todo] = guess[cand[at[~inside]]]
        todo = todo[guess[todo] >= 0]
    return parent


def op_reach(is_op: np.ndarray, row: np.ndarray) -> np.ndarray:
    """Per event of a PyTorch trace: :data:`EXACT_REACH_NS` for its ops and frames, no bound (``np.inf``) for its
    runtime calls (rows that are no op), which Kineto times by another clock than the ops around them: a
    launch that ends past its op is still the op's (its kernels' device time goes to it)."""
    return np.where(is_op | ~row, EXACT_REACH_NS, np.inf)


def past_frames(parent: np.ndarray, row: np.ndarray) -> np.ndarray:
    """Each ``row`` event's nearest enclosing ``row`` event, the frames between skipped; -1 for none and for
    every frame: a frame (a PyTorch trace's ``user_annotation`` or ``python_function``, which is no row)
    inside an op takes nothing from the op's self time and its ops count against the op around it (else
    the frame's own time would belong to no row and no total)."""
    at = np.where(row, parent, -1)
    while (frame := (at >= 0) & ~row[np.maximum(at, 0)]).any():
        at[frame] = parent[at[frame]]
    return at


def depths(parent: np.ndarray) -> np.ndarray:
    """Nesting level of each event: 0 for top level."""
    depth = np.zeros(parent.size, dtype=np.int64)
    nested = parent >= 0
    while True:  # one pass per level; levels are few
        new = np.where(nested, depth[np.maximum(parent, 0)] + 1, 0)
        if np.array_equal(new, depth):
            return depth
        depth = new


def self_times(parent: np.ndarray, start: np.ndarray, end: np.ndarray, *, clip: bool = True) -> np.ndarray:
    """Each event's duration minus the part of its span its children cover (>= 0).

    ``clip`` (ONNX Runtime's truncated µs): a child that ends past its parent's end (by 1 µs at most) is
    first cut at that end, outermost first, so no nanosecond is counted twice: not in the parent, nor in
    the child and in what follows the parent. Without it (exact clocks) such a child keeps its own
    duration, and an event's self time is the part of its span that nothing nested in it covers: a
    grandchild's time past its parent's end is its grandparent's no more, and siblings that overlap take
    their overlap once (:func:`_covered`).
    """
    child = np.flatnonzero(parent >= 0)
    if not clip and child.size:
        inner = _covered(parent, child, start, end)
        return np.clip((end - start) - inner, 0, None)
    if child.size:  # truncated µs
        end = end.copy()
        depth = depths(parent)
        for d in range(1, int(depth.max()) + 1):
            rows = np.flatnonzero(depth == d)
            end[rows] = np.maximum(np.minimum(end[rows], end[parent[rows]]), start[rows])
    p = parent[child]
    overlap = np.clip(np.minimum(end[child], end[p]) - start[child], 0, None)
    inner = np.bincount(p, weights=overlap.astype(np.float64), minlength=start.size)
    return np.clip((end - start) - inner, 0, None)


def _covered(parent: np.ndarray, child: np.ndarray, start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Per event, how much of its span the events nested in it cover (the union, each counted once).

    What a child and everything nested in it cover is one stretch, from the child's start to the furthest
    end among them (each starts inside the one around it); a parent's covered time is the union of its
    children's stretches, cut at its own end: its children by start, each adding what lies past the
    furthest end of the ones before it (a running maximum within each parent, by doubling steps). A child
    that starts at or past its parent's end (an op's frame may end past the op, and :func:`past_frames`
    gives what ran in it to the op) is counted as its grandparent's, which it lies in: so every stretch
    starts inside its parent. Times are taken from each parent's start, in the input's type, so that
    absolute ns of today's clocks keep their last digits."""
    parent = parent.copy()
    while (past := child[(parent[child] >= 0) & (start[child] >= end[np.maximum(parent[child], 0)])]).size:
        parent[past] = parent[parent[past]]
    child = child[parent[child] >= 0]
    depth = depths(parent)
    reach_end = end.copy()  # the end of what each event and everything in it covers
    for d in range(int(depth.max(initial=0)), 0, -1):
        rows = np.flatnonzero(depth == d)
        np.maximum.at(reach_end, parent[rows], reach_end[rows])
    p = parent[child]
    order = np.lexsort((start[child], p))
    p, c = p[order], child[order]
    lo = (start[c] - start[p]).astype(np.float64)
    hi = np.maximum((np.minimum(reach_end[c], end[p]) - start[p]).astype(np.float64), lo)
    first = np.ones(hi.size, dtype=bool)
    first[1:] = p[1:] != p[:-1]
    furthest = hi.copy()  # the running maximum of hi within each parent's children, by doubling steps
    if bool((~first[1:] & (hi[1:] < hi[:-1])).any()):  # else hi is its own running maximum
        starts = np.flatnonzero(first)
        longest = int(np.diff(np.append(starts, hi.size)).max())
        step = 1
        while step < longest:
            same = p[step:] == p[:-step]
            furthest[step:] = np.where(same, np.maximum(furthest[step:], furthest[:-step]), furthest[step:])
            step *= 2
    before = np.where(first, lo, np.append(lo[:1], furthest[:-1]))
    added = np.clip(hi - np.maximum(lo, before), 0, None)
    return np.bincount(p, weights=added, minlength=start.size)


def nest(thread: np.ndarray, start: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
    """Self times (ns in, ns out, float64) of events timed by an exact clock, and each event's parent
    (:func:`enclosing`) when anything nests (else None: nothing overlaps on any thread)."""
    order = np.lexsort((start, thread))
    t, s, e = thread[order], start[order], end[order]
    if not np.any((t[1:] == t[:-1]) & (s[1:] < e[:-1])):
        return np.clip(end - start, 0, None).astype(np.float64), None
    parent = enclosing(thread, start, end - start, zero_first=False, reach=EXACT_REACH_NS)
    return self_times(parent, start, end, clip=False), parent


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
    return np.where(any_ancestor(parent, lambda up, rows: known[up]), np.nan, values)


def any_ancestor(parent: np.ndarray, test: Callable[[np.ndarray, np.ndarray], np.ndarray]) -> np.ndarray:
    """Per row, whether a row around it (the ``parent`` chain, -1 at the top) passes ``test(around, rows)``
    (index arrays of equal size; a boolean per pair). Up the chains a level at a time, a row dropped once
    answered: the work shrinks with each level rather than staying the size of the table."""
    found = np.zeros(parent.size, dtype=bool)
    rows = np.flatnonzero(parent >= 0)
    up = parent[rows]
    while rows.size:
        hit = test(up, rows)
        found[rows[hit]] = True
        rows, up = rows[~hit], parent[up[~hit]]
        more = up >= 0
        rows, up = rows[more], up[more]
    return found
