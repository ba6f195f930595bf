"""Forward hooks that call a collector at every module's boundaries, and wrapped forwards that do the same
for a given set of modules.

The hooks are global (``torch.nn.modules.module.register_module_forward_pre_hook``): two registrations
however many modules, and a module not in the profiled model is looked up and passed over. They are
installed for a profiled pass only: a module with no hook left takes torch's fast call path again,
so the plain runs they alternate with carry no cost of them.

Global hooks see every module call in the process, layerperf's own included: the untimed re-run an
in-code profile makes for its shapes and FLOPs, a loss re-run, an optimizer step replayed, a backend's
passes. Those run inside :func:`own_calls`, and an in-code profiler passes over what runs there
(:data:`OWN_CALLS`), so a profiler nested in another, or overlapping it, records none of the other's
passes as a run of its own.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

Boundary = Callable[[int], None]

#: The threads (``threading.get_ident()``) now calling a model for layerperf itself (see :func:`own_calls`).
OWN_CALLS: set[int] = set()


@contextmanager
def own_calls() -> Iterator[None]:
    """While inside, the module calls and optimizer steps on this thread are layerperf's own (a pass for
    shapes and FLOPs, a backend's runs): no in-code profiler records them."""
    tid = threading.get_ident()
    if tid in OWN_CALLS:  # already inside one
        yield
        return
    OWN_CALLS.add(tid)
    try:
        yield
    finally:
        OWN_CALLS.discard(tid)


@contextmanager
def forward_hooks(pre: Callable[[Any, Any], None], post: Callable[[Any, Any, Any], None]) -> Iterator[None]:
    """While inside: ``pre(module, args)`` before and ``post(module, args, output)`` after every module's
    forward, in the whole process (post also when the forward raises)."""
    from torch.nn.modules import module as torch_module

    handles = [torch_module.register_module_forward_pre_hook(pre),
               torch_module.register_module_forward_hook(post, always_call=True)]
    try:
        yield
    finally:
        for h in handles:
            h.remove()


@contextmanager
def module_hooks(index: dict[int, int], start: Boundary, stop: Boundary) -> Iterator[None]:
    """While inside: ``start(i)`` before and ``stop(i)`` after the forward of each module whose ``id``
    ``index`` maps to layer ``i`` (stop also when the forward raises)."""
    lookup = index.get

    def pre(mod: Any, _args: Any) -> None:
        i = lookup(id(mod))
        if i is not None:
            start(i)

    def post(mod: Any, _args: Any, _out: Any) -> None:
        i = lookup(id(mod))
        if i is not None:
            stop(i)

    with forward_hooks(pre, post):
        yield


@contextmanager
def forward_wrappers(targets: list[tuple[Any, int]], start: Boundary, stop: Boundary) -> Iterator[None]:
    """While inside: ``start(i)`` before and ``stop(i)`` after each forward of each ``(module, i)`` of
    ``targets`` (stop also when it raises), by the module's ``forward`` wrapped as an attribute of its
    own. torch calls a module with no hooks by its fast path, straight to ``forward``; hooks send every
    module's call through the slow one, which under torch.profiler cost level 2 2-5% of the run
    (benchmarks/torch_overhead.py). A forward the module had as its own attribute is put back after."""
    saved: list[tuple[Any, Any]] = []
    missing = object()
    try:
        for mod, i in targets:
            own = mod.__dict__.get("forward", missing)
            mod.__dict__["forward"] = _wrapped(mod.forward, i, start, stop)
            saved.append((mod, own))
        yield
    finally:
        for mod, own in reversed(saved):
            if own is missing:
                mod.__dict__.pop("forward", None)
            else:
                mod.__dict__["forward"] = own


def _wrapped(forward: Callable[..., Any], i: int, start: Boundary, stop: Boundary) -> Callable[..., Any]:
    def call(*args: Any, **kwargs: Any) -> Any:
        start(i)
        try:
            return forward(*args, **kwargs)
        finally:
            stop(i)

    call.__wrapped__ = forward  # type: ignore[attr-defined]  # inspect.signature sees the module's own
    return call
