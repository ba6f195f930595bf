"""ONNX nodes followed through the Relax passes to the VM calls that run them.

:mod:`.importer` gives each binding var of the imported ``main`` its ONNX node. The passes keep most
Var objects (LegalizeOps, FoldConstant, FuseTIR rewrite a binding's value, not its var), so each
kept module (:class:`~.pipeline.Snapshots`) is read with the previous one's owners:

* a var seen before keeps its nodes;
* a new var takes the nodes of the next owned binding in its block (a pass that expands one binding
  into several emits the helpers just before the binding they serve);
* FuseOps moves bindings into ``Primitive`` functions: a fused call owns every node of its members;
  members keep their vars except each group's output, which gets a new one; those are matched, by
  callee, in order, with the calls of the module before that no longer appear anywhere;
* a var bound to another var (``main``'s output, ``gv = lv5``) has that var's nodes, in every module:
  FuseOps gives the last group's output a new var while ``gv`` still aliases it, and FuseTIR then
  binds the group's call to ``gv`` itself, which must not keep the one node it aliased at import.

At the last kept module every call binding (``call_tir`` kernels; ``R.reshape``, which runs as
``vm.builtin.reshape``) is lined up with ``main``'s bytecode call instructions by callee name.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from tvm import relax

from layerperf.backends.tvm.bytecode import Function
from layerperf.backends.tvm.calls import CallMap, CallSite, is_builtin, serving
from layerperf.backends.tvm.importer import bindings
from layerperf.backends.tvm.pipeline import Snapshots

Owner = dict[Any, tuple[int, ...]]


@dataclass(frozen=True, slots=True)
class Expected:
    """A call binding of the last kept module: what the VM will call for it, and its nodes."""

    func: str
    nodes: tuple[int, ...]
    n_inputs: int | None


def callee(value: Any) -> str | None:
    """The function a binding's value makes the VM call, when it is one the mapping follows."""
    if not isinstance(value, relax.Call):
        return None
    if hasattr(value.op, "name_hint"):  # a GlobalVar: a call of another function of the module
        return str(value.op.name_hint)
    name = str(getattr(value.op, "name", ""))
    if name in ("relax.call_tir", "relax.call_tir_inplace"):
        return str(value.args[0].name_hint)
    if name == "relax.call_dps_packed":
        return str(value.args[0].global_symbol)
    if name == "relax.reshape":
        return "vm.builtin.reshape"
    return None


def _n_inputs(value: Any) -> int | None:
    name = str(getattr(value.op, "name", ""))
    if name in ("relax.call_tir", "relax.call_tir_inplace", "relax.call_dps_packed"):
        args = value.args[1]
        return len(args.fields) if isinstance(args, relax.Tuple) else 1
    return 1 if name == "relax.reshape" else None


def _primitive(mod: Any, value: Any) -> Any | None:
    """The fused (``Primitive``) Relax function a binding calls, if it calls one."""
    if not isinstance(value, relax.Call) or not hasattr(value.op, "name_hint"):
        return None
    func = mod[value.op] if value.op in mod.functions else None
    if isinstance(func, relax.Function) and func.attrs is not None and "Primitive" in func.attrs:
        return func
    return None


def _merge(parts: Iterable[tuple[int, ...]]) -> tuple[int, ...]:
    return tuple(sorted({n for p in parts for n in p}))


def _inherit(items: Sequence[tuple[Any, tuple[int, ...] | None]]) -> list[tuple[int, ...]]:
    """Nodes per binding: its own, else the next owned binding's, else the previous one's."""
    out: list[tuple[int, ...] | None] = [nodes for _, nodes in items]
    following: tuple[int, ...] | None = None
    for i in range(len(out) - 1, -1, -1):
        if out[i] is None:
            out[i] = following
        else:
            following = out[i]
    preceding: tuple[int, ...] = ()
    for i, nodes in enumerate(out):
        out[i] = nodes if nodes is not None else preceding
        preceding = out[i] or preceding
    return [n or () for n in out]


def _plain_step(mod: Any, owner: Owner) -> Owner:
    items = [(b.var, owner.get(b.var)) for b in bindings(mod["main"])]
    return {var: nodes for (var, _), nodes in zip(items, _inherit(items), strict=True)}


def _key(value: Any, env: dict[Any, Any]) -> tuple[Any, ...] | None:
    """What a binding computes, its operands seen through ``env`` (a fused function's params and
    members -> the vars of the module before fusion): equal keys, same computation."""
    if isinstance(value, relax.TupleGetItem):
        return ("item", env.get(value.tuple_value, value.tuple_value), int(value.index))
    name = callee(value)
    if name is None:
        return None
    packed = _n_inputs(value) is not None and name != "vm.builtin.reshape" and isinstance(value.args[1], relax.Tuple)
    args = value.args[1].fields if packed else value.args
    return ("call", name, *(env.get(a, a) for a in args))


class _Before:
    """The bindings of the module before fusion: by what they compute, and by callee in order."""

    def __init__(self, mod: Any) -> None:
        self.by_key: dict[tuple[Any, ...], Any] = {}
        self.by_callee: dict[str, deque[Any]] = {}
        self.used: set[Any] = set()
        for b in bindings(mod["main"]):
            key = _key(b.value, {})
            if key is not None:
                self.by_key.setdefault(key, b.var)
            name = callee(b.value)
            if name is not None:
                self.by_callee.setdefault(name, deque()).append(b.var)

    def find(self, value: Any, env: dict[Any, Any]) -> Any | None:
        """The var the binding computing ``value`` had before fusion: by its operands, else the first
        unused one with its callee (where an operand is not traceable, e.g. a constant copied)."""
        key = _key(value, env)
        var = self.by_key.get(key) if key is not None else None
        if var is None or var in self.used:
            queue = self.by_callee.get(callee(value) or "", deque())
            while queue and queue[0] in self.used:
                queue.popleft()
            var = queue[0] if queue else None
        if var is not None:
            self.used.add(var)
        return var


def _fused_step(prev_mod: Any, mod: Any, owner: Owner) -> Owner:
    """Owners after FuseOps. A fused function may serve several call sites (structurally equal
    groups share one), so its members are resolved per call: the function is replayed on the
    call's arguments and each member found, by what it computes, among the bindings before."""
    before = _Before(prev_mod)
    seen: dict[Any, Any] = {}  # var after fusion -> the var before it computes the same value
    items: list[tuple[Any, tuple[int, ...] | None]] = []
    for b in bindings(mod["main"]):
        func = _primitive(mod, b.value)
        if func is None:
            if isinstance(b.value, relax.TupleGetItem) and isinstance(seen.get(b.value.tuple_value), list):
                seen[b.var] = seen[b.value.tuple_value][int(b.value.index)]
            items.append((b.var, owner.get(b.var) or owner.get(seen.get(b.var))))
            continue
        env = {p: seen.get(a, a) for p, a in zip(func.params, b.value.args, strict=False)}
        parts = []
        for ib in bindings(func):
            var = before.find(ib.value, env)
            if var is not None:
                env[ib.var] = var
                parts.append(owner.get(var, ()))
        result = func.body.body
        seen[b.var] = [env.get(f) for f in result.fields] if isinstance(result, relax.Tuple) else env.get(result)
        items.append((b.var, _merge(parts) or None))
    return {var: nodes for (var, _), nodes in zip(items, _inherit(items), strict=True)}


def _aliased(mod: Any, owner: Owner) -> Owner:
    """``owner`` with each var bound to another var given that var's nodes (in binding order, so a
    chain of aliases ends at the binding that computes the value)."""
    out = dict(owner)
    for b in bindings(mod["main"]):
        if isinstance(b.value, relax.Var) and out.get(b.value):
            out[b.var] = out[b.value]
    return out


def _fused(mod: Any) -> bool:
    return any(_primitive(mod, b.value) is not None for b in bindings(mod["main"]))


def follow(snapshots: Snapshots, import_owner: dict[Any, int]) -> tuple[Any, Owner]:
    """The last kept module and each of its ``main`` binding vars' nodes."""
    owner: Owner = {var: (k,) for var, k in import_owner.items()}
    prev = None
    for _, mod in snapshots.modules:
        fused_now = prev is not None and _fused(mod) and not _fused(prev)
        owner = _aliased(mod, _fused_step(prev, mod, owner) if fused_now else _plain_step(mod, owner))
        prev = mod
    if prev is None:
        raise ValueError("no module was kept during the compile")
    return prev, owner


def expected_calls(mod: Any, owner: Owner) -> list[Expected]:
    """The calls the VM will make for ``main``'s bindings, in order."""
    out = []
    for b in bindings(mod["main"]):
        name = callee(b.value)
        if name is not None:
            out.append(Expected(name, owner.get(b.var, ()), _n_inputs(b.value)))
    return out


def align(main: Function, expected: Sequence[Expected], lookahead: int = 8) -> tuple[list[CallSite], list[str]]:
    """``main``'s call instructions as call sites, matched in order with ``expected`` by callee."""
    funcs = [ins.func for ins in main.calls]
    serves = serving(funcs)
    sites, warnings, j = [], [], 0
    for i, func in enumerate(funcs):
        match = None
        for k in range(j, min(j + lookahead, len(expected))):
            if expected[k].func == func:
                match = k
                break
            if is_builtin(func):  # a builtin only matches the very next expected call
                break
        if match is None:
            if not is_builtin(func):
                warnings.append(f"kernel call {i} ({func}) matched no Relax binding")
            sites.append(CallSite(i, func, serves=serves[i]))
            continue
        if match > j:
            warnings.append(f"{match - j} Relax call(s) before {func} (call {i}) ran as no VM call")
        e = expected[match]
        sites.append(CallSite(i, func, e.nodes, e.n_inputs, serves[i]))
        j = match + 1
    return sites, warnings


def _status(n_nodes: int, import_owner: dict[Any, int], call_owner: Owner, sites: Sequence[CallSite]) -> list[str]:
    """Each node's status: in a call site; else bound by no call binding at the end (folded away or
    never bound: resolved at import); else lost between the last module and the bytecode."""
    in_call = {n for s in sites for n in s.nodes}
    bound_at_import = set(import_owner.values())
    in_call_binding = {n for nodes in call_owner.values() for n in nodes}
    out = []
    for k in range(n_nodes):
        if k in in_call:
            out.append("kernel")
        elif k not in bound_at_import:
            out.append("import")
        elif k in in_call_binding:
            out.append("unmapped")
        else:
            out.append("folded")
    return out


def call_map(snapshots: Snapshots, import_owner: dict[Any, int], n_nodes: int, main: Function) -> CallMap:
    """Every call site of ``main`` with its ONNX nodes, and each node's status."""
    last, owner = follow(snapshots, import_owner)
    expected = expected_calls(last, owner)
    sites, warnings = align(main, expected)
    if not main.straight:
        warnings.append("main branches (control flow): call sites are matched in text order and may be off")
    call_owner = {b.var: owner.get(b.var, ()) for b in bindings(last["main"]) if callee(b.value) is not None}
    status = _status(n_nodes, import_owner, call_owner, sites)
    return CallMap(tuple(sites), tuple(status), tuple(warnings))
