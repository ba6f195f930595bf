"""The Relax VM's memory in one run: storage allocations, the tensors placed in them, and their frees.

The VM allocates in two steps: ``vm.builtin.alloc_storage`` takes a block from the device's
allocator (the memory plan reuses one block for several tensors whose lives do not overlap), and
``vm.builtin.alloc_tensor`` places a tensor in a block. The hook sees both with their sizes, but a
free only as ``vm.builtin.null_value`` clearing a register; the bytecode says which. Values are
reference-counted: a block lives while its register or any tensor placed in it does; a tensor while a
register holds it or a view of it (``vm.builtin.reshape``'s result shares its data).

Two peaks follow, as RAF's memory profiler gives them: the most bytes of blocks held at once
(*allocated*: what the VM took from its allocator) and the most bytes of live tensors (*used*).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from layerperf.analysis.memory.allocations import AllocEvent, ModuleSpan, attribute
from layerperf.backends.tvm.bytecode import Function, Instr, is_register
from layerperf.backends.tvm.calls import BUILTIN_PREFIX, CallSite
from layerperf.data.memory_report import Allocations
from layerperf.data.tensor import dtype_itemsize

ALLOC_STORAGE = BUILTIN_PREFIX + "alloc_storage"
ALLOC_TENSOR = BUILTIN_PREFIX + "alloc_tensor"
SOURCE = "tvm relax vm (alloc_storage / alloc_tensor / null_value)"


def alloc_nbytes(func: str, args: Sequence[object]) -> int | None:
    """The bytes an allocation builtin asks for, from the hook's arguments: alloc_storage's
    ``(vm, shape, device, dtype, scope)``, alloc_tensor's ``(storage, offset, shape, dtype)``."""
    if func not in (ALLOC_STORAGE, ALLOC_TENSOR):
        return None
    try:
        shape, dtype = (args[1], args[3]) if func == ALLOC_STORAGE else (args[2], args[3])
        dims: list[int] = [int(d) for d in shape]  # type: ignore[attr-defined]
        return math.prod(dims) * dtype_itemsize(str(dtype))
    except (IndexError, TypeError, ValueError, KeyError):
        return None


@dataclass(frozen=True, slots=True)
class MemEvent:
    """One change: at call ``call``, ``nbytes`` (below 0: freed) of a block or a tensor (``obj``: the
    call that allocated it)."""

    call: int
    nbytes: int
    obj: int
    kind: str  # "storage" | "tensor"


@dataclass(slots=True)
class _Obj:
    nbytes: int
    kind: str
    parent: int | None  # a tensor's block
    refs: int = 0


@dataclass(slots=True)
class _Heap:
    objs: dict[int, _Obj] = field(default_factory=dict)
    regs: dict[str, list[int]] = field(default_factory=dict)
    events: list[MemEvent] = field(default_factory=list)

    def put(self, reg: str, held: list[int], call: int) -> None:
        """``reg`` now holds ``held``; what it held before is let go (after: a result may keep it)."""
        for o in held:
            self.objs[o].refs += 1
        before = self.regs.get(reg, [])
        self.regs[reg] = held
        for o in before:
            self.release(o, call)

    def release(self, o: int, call: int) -> None:
        obj = self.objs[o]
        obj.refs -= 1
        if obj.refs == 0:
            self.events.append(MemEvent(call, -obj.nbytes, o, obj.kind))
            if obj.parent is not None:
                self.release(obj.parent, call)

    def new(self, call: int, nbytes: int, kind: str, parent: int | None) -> int:
        self.objs[call] = _Obj(nbytes, kind, parent)
        if parent is not None:
            self.objs[parent].refs += 1  # the tensor keeps its block
        self.events.append(MemEvent(call, nbytes, call, kind))
        return call


def _step(heap: _Heap, i: int, ins: Instr, nbytes: int | None) -> None:
    if ins.dst is None:
        return
    if ins.func == ALLOC_STORAGE:
        held = [heap.new(i, nbytes or 0, "storage", None)]
    elif ins.func == ALLOC_TENSOR:
        blocks = heap.regs.get(ins.args[0], []) if ins.args and is_register(ins.args[0]) else []
        held = [heap.new(i, nbytes or 0, "tensor", blocks[0] if blocks else None)]
    else:
        # Any other result (null_value: nothing; a reshape's view, a tuple: what its arguments held).
        held = sorted({o for r in ins.registers() for o in heap.regs.get(r, [])})
    heap.put(ins.dst, held, i)


def events(main: Function, nbytes: Mapping[int, int]) -> tuple[list[MemEvent], int]:
    """The memory events of one run of ``main`` (``nbytes``: call -> bytes of each allocation, as
    the hook saw them) and the block bytes still held when it returns (its outputs')."""
    heap = _Heap()
    for i, ins in enumerate(main.calls):
        _step(heap, i, ins, nbytes.get(i))
    held = heap.regs.get(main.ret or "", [])
    blocks = {o if heap.objs[o].parent is None else heap.objs[o].parent for o in held}
    return heap.events, sum(heap.objs[b].nbytes for b in blocks if b is not None)


@dataclass(frozen=True, slots=True)
class VmMemory:
    """One run's memory, from the VM's own allocations (the weights, made before, are not in it)."""

    allocated_bytes: int  # every block taken in the run
    blocks: int
    tensors: int
    peak_allocated_bytes: int  # the most block bytes held at once
    peak_used_bytes: int  # the most live tensor bytes at once
    peak_call: int | None  # the call at the used peak (the allocation that reached it)
    retained_bytes: int  # block bytes held at return: the outputs' blocks
    per_call: dict[int, int]  # call -> block bytes allocated for it (at each allocation call)


def _peak(evs: Sequence[MemEvent], kind: str) -> tuple[int, int | None]:
    live = top = 0
    at = None
    for e in evs:
        if e.kind != kind:
            continue
        live += e.nbytes
        if live > top:
            top, at = live, e.call
    return top, at


def summarize(evs: Sequence[MemEvent], retained_bytes: int) -> VmMemory:
    peak_alloc, _ = _peak(evs, "storage")
    peak_used, at = _peak(evs, "tensor")
    storage = [e for e in evs if e.kind == "storage" and e.nbytes > 0]
    per_call: dict[int, int] = {}
    for e in storage:
        per_call[e.call] = per_call.get(e.call, 0) + e.nbytes
    return VmMemory(sum(e.nbytes for e in storage), len(storage),
                    sum(1 for e in evs if e.kind == "tensor" and e.nbytes > 0), peak_alloc, peak_used, at,
                    retained_bytes, per_call)


def allocations(evs: Sequence[MemEvent], call_ns: Sequence[tuple[int, int]], spans: Sequence[ModuleSpan],
                names: Sequence[str], device: str = "cpu") -> Allocations:
    """The block events as layerperf's allocator record (``analysis.memory.allocations.attribute``):
    ``call_ns`` is each call's (start, end) in one pass, ``spans`` the layers' calls in that pass.
    An allocation is dated at its call's start, a free at its call's end."""
    alloc = [AllocEvent(call_ns[e.call][0 if e.nbytes > 0 else 1], e.nbytes, e.obj) for e in evs
             if e.kind == "storage"]
    start = call_ns[0][0] if call_ns else 0
    end = call_ns[-1][1] if call_ns else 0
    return attribute(spans, alloc, names, start_ns=start, end_ns=end, device=device, source=SOURCE)


def layer_spans(sites: Sequence[CallSite], layer_of: Sequence[int], call_ns: Sequence[tuple[int, int]]
                ) -> list[ModuleSpan]:
    """The layers' spans in one pass for the allocator record: a layer's own call, widened to the
    builtins that serve it (the allocations before a kernel, the frees after it), so that at level 1,
    where builtins are no rows, a kernel's blocks are counted as its own."""
    spans: list[ModuleSpan] = []
    for site, (start, end) in zip(sites, call_ns, strict=True):
        layer = layer_of[site.call]
        if layer < 0 and site.serves is not None:
            layer = layer_of[site.serves]
        if layer < 0:
            continue
        if spans and spans[-1].layer == layer:
            spans[-1] = ModuleSpan(layer, spans[-1].start_ns, end)
        else:
            spans.append(ModuleSpan(layer, start, end))
    return spans
