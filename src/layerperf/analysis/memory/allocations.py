"""Allocator events attributed to the module running when each happened: bytes allocated and freed per
module, the peak of live bytes and the module at it.

Backend-neutral data and arithmetic: a backend records one pass's allocation events (time, signed
bytes, address; a free is negative) and its modules' spans (layer, start, end, on the same clock),
and :func:`attribute` does the rest. An event belongs to the *innermost* span open at its time
(its module's *self* figures) and to every span enclosing that one (the *inclusive* figures); an
event in no span but inside the pass is the model's own code, outside every module. Live bytes count
only what the pass allocated: they start at 0 when the pass begins (the weights and inputs, made
before, are not in them), and a free of a block allocated before the pass lowers them too.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from layerperf.data.memory_report import OUTSIDE, OUTSIDE_NAME, Allocations, ModuleAllocations


@dataclass(frozen=True, slots=True)
class AllocEvent:
    """One allocator event: when (ns, the spans' clock), how many bytes (a free below 0), where."""

    t_ns: int
    nbytes: int
    addr: int


@dataclass(frozen=True, slots=True)
class ModuleSpan:
    """One call of a module: its layer index and its start and end (ns, both included)."""

    layer: int
    start_ns: int
    end_ns: int


@dataclass(slots=True)
class _Sums:
    calls: int = 0
    self_alloc: int = 0
    self_freed: int = 0
    self_count: int = 0
    alloc: int = 0
    freed: int = 0
    peak_live: int | None = None
    peak_rise: int | None = None

    def done(self, layer: int, name: str, live_at_end: int) -> ModuleAllocations:
        # a call left open (spans that do not nest) saw the live bytes up to the pass's end at least
        peak = self.peak_live if self.peak_live is not None else live_at_end
        return ModuleAllocations(layer, name, self.calls, self.self_alloc, self.self_freed, self.self_count,
                                 self.alloc, self.freed, peak, self.peak_rise or 0)


@dataclass(slots=True)
class _Frame:
    layer: int
    end_ns: int
    start_live: int
    peak_live: int


# at one instant: a span opens before an event there, and closes after it (both ends are inside)
_OPEN, _EVENT, _CLOSE = 0, 1, 2


def _script(spans: Sequence[ModuleSpan], events: Sequence[AllocEvent]) -> list[tuple[int, int, int, int]]:
    """Span opens, events and span closes as one time-ordered list of (t, kind, tie-break, index)."""
    out = [(s.start_ns, _OPEN, -s.end_ns, k) for k, s in enumerate(spans)]  # the enclosing one opens first
    out += [(s.end_ns, _CLOSE, -s.start_ns, k) for k, s in enumerate(spans)]  # the inner one closes first
    out += [(e.t_ns, _EVENT, k, k) for k, e in enumerate(events)]  # events at one instant keep their order
    return sorted(out)


def attribute(spans: Sequence[ModuleSpan], events: Sequence[AllocEvent], names: Sequence[str], *,
              start_ns: int, end_ns: int, device: str = "cpu", source: str = "") -> Allocations:
    """The allocations of one pass (``start_ns`` to ``end_ns``; events outside it are left out) with
    each event attributed to the innermost of ``spans`` open at its time; ``names``: the layers' names."""
    inside = [e for e in events if start_ns <= e.t_ns <= end_ns]
    sums: dict[int, _Sums] = {}
    stack: list[_Frame] = []
    live = 0
    held: dict[int, int] = {}
    unmatched = 0
    t_out: list[int] = []
    live_out: list[int] = []
    layer_out: list[int] = []
    nested_ok = True
    for _t, kind, _tie, k in _script(spans, inside):
        if kind == _OPEN:
            stack.append(_Frame(spans[k].layer, spans[k].end_ns, live, live))
        elif kind == _CLOSE:
            frame = _pop(stack, spans[k])
            nested_ok = nested_ok and frame is not None
            if frame is not None:
                _close(sums.setdefault(frame.layer, _Sums()), frame)
        else:
            ev = inside[k]
            live += ev.nbytes
            inner = stack[-1].layer if stack else OUTSIDE
            _count(sums.setdefault(inner, _Sums()), ev.nbytes, own=True)
            for layer in {f.layer for f in stack} - {inner}:
                _count(sums.setdefault(layer, _Sums()), ev.nbytes, own=False)
            for f in stack:
                f.peak_live = max(f.peak_live, live)
            unmatched += _pair(held, ev)
            t_out.append(ev.t_ns - start_ns)
            live_out.append(live)
            layer_out.append(inner)
    peak_k = max(range(len(live_out)), key=lambda i: (live_out[i], -i)) if live_out else -1
    peak_layer = layer_out[peak_k] if peak_k >= 0 else OUTSIDE
    peak = live_out[peak_k] if peak_k >= 0 else 0
    own = sums.pop(OUTSIDE, _Sums())
    own.calls, own.peak_live, own.peak_rise = 1, peak, peak  # the model's code runs the whole pass, from 0
    outside = own.done(OUTSIDE, OUTSIDE_NAME, live)
    modules = tuple(sums[i].done(i, names[i] if 0 <= i < len(names) else f"#{i}", live) for i in sorted(sums))
    warnings = () if nested_ok else ("module spans overlap without nesting: some calls were left out",)
    return Allocations(
        device=device, source=source, dur_ns=end_ns - start_ns, events=len(inside),
        allocated_bytes=sum(e.nbytes for e in inside if e.nbytes > 0),
        freed_bytes=-sum(e.nbytes for e in inside if e.nbytes < 0),
        peak_live_bytes=peak,
        peak_t_ns=t_out[peak_k] if peak_k >= 0 else None, peak_layer=peak_layer,
        peak_module="" if peak_k < 0 else OUTSIDE_NAME if peak_layer == OUTSIDE else modules_name(names, peak_layer),
        retained_bytes=sum(held.values()), unmatched_free_bytes=unmatched, outside=outside, modules=modules,
        t_ns=tuple(t_out), live_bytes=tuple(live_out), layer=tuple(layer_out), warnings=warnings)


def modules_name(names: Sequence[str], layer: int) -> str:
    return names[layer] if 0 <= layer < len(names) else f"#{layer}"


def _pop(stack: list[_Frame], span: ModuleSpan) -> _Frame | None:
    """The frame ``span`` opened, taken off the stack (the top one when spans nest, as hooks make them)."""
    for j in range(len(stack) - 1, -1, -1):
        if stack[j].layer == span.layer and stack[j].end_ns == span.end_ns:
            frame = stack.pop(j)
            return frame if j == len(stack) else None
    return None


def _close(s: _Sums, frame: _Frame) -> None:
    s.calls += 1
    s.peak_live = frame.peak_live if s.peak_live is None else max(s.peak_live, frame.peak_live)
    rise = frame.peak_live - frame.start_live
    s.peak_rise = rise if s.peak_rise is None else max(s.peak_rise, rise)


def _count(s: _Sums, nbytes: int, *, own: bool) -> None:
    if nbytes > 0:
        s.alloc += nbytes
    else:
        s.freed -= nbytes
    if own:
        if nbytes > 0:
            s.self_alloc += nbytes
            s.self_count += 1
        else:
            s.self_freed -= nbytes


def _pair(held: dict[int, int], ev: AllocEvent) -> int:
    """Track the blocks the pass allocated by address; the bytes of a free of one allocated before it."""
    if ev.nbytes > 0:
        held[ev.addr] = held.get(ev.addr, 0) + ev.nbytes
        return 0
    size = held.pop(ev.addr, None)
    if size is None:
        return -ev.nbytes
    if size + ev.nbytes > 0:  # a partial free is not something allocators do; keep the rest held
        held[ev.addr] = size + ev.nbytes
    return 0
