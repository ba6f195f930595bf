"""Backward rows: each module call's backward, timed from the autograd nodes its forward created.

Why not torch's full backward hooks: they wrap every module's outputs in a ``BackwardHookFunction``
view, and an in-place op on such an output (``ReLU(inplace=True)`` after a BatchNorm, ``out += x``
in a residual block) then fails with "Output 0 of BackwardHookFunction is a view and is being
modified inplace" — the profiled training step itself would break on most CNNs. Node hooks change
nothing the model computes.

How: when a module's forward returns (grad mode on), its outputs' ``grad_fn`` are kept; when the
top-level forward has returned (so the walk is in no module's time), the nodes each call created are
found by walking back from those to its inputs' ``grad_fn`` (stopping at the inputs' nodes, at nodes
created before them, and at ``AccumulateGrad``: adding into ``.grad`` is in no row). In the
backward, the first of those nodes to start opens the call's row and the last to finish closes it.
A node a module shares with its children (a container's last child's nodes) opens the outer row
first and closes the inner one first, so rows nest as the modules do; autograd runs the nodes of
one module call one after another unless two branches interleave (told by the caller, see
:mod:`.recording`). A call whose nodes do not all run in a backward (an output the loss does not use)
is closed when that backward ends, and counted in a warning.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from layerperf.backends.torch.record import tensors

ACCUMULATE = "AccumulateGrad"


@dataclass(slots=True, eq=False)
class _Call:
    """One forward call of a module, as its backward will run."""

    module: Any
    nodes: int
    left: int = 0
    open: bool = False


class BackwardCalls:
    """Node hooks for the modules' backward; ``start(module)`` / ``stop(module)`` at its row's bounds,
    only while ``active()`` (a run is being recorded)."""

    def __init__(self, start: Callable[[Any], None], stop: Callable[[Any], None],
                 active: Callable[[], bool]) -> None:
        self._start, self._stop, self._active = start, stop, active
        self._inputs: list[tuple[set[Any], int] | None] = []  # per forward on the stack: inputs' nodes, seq bound
        self._done: list[tuple[Any, list[Any], set[Any], int]] = []  # forwards returned, not yet walked
        self._open: list[_Call] = []
        self._flush_queued = False
        self.unfinished = 0  # calls closed by the end of a backward, not by their last node

    def forward_pre(self, args: Any, track: bool) -> None:
        """Before a module's forward: remember its inputs' nodes (``track``: its backward is wanted)."""
        import torch

        if not track or not torch.is_grad_enabled():
            self._inputs.append(None)
            return
        nodes = {t.grad_fn for t in tensors(args) if t.grad_fn is not None}
        bound = max((_seq(n) for n in nodes), default=-1)
        self._inputs.append((nodes, bound))

    def forward_post(self, module: Any, out: Any) -> None:
        """After a module's forward (every pre is followed by one post): keep its outputs' nodes; they
        are walked when the top-level forward returns, so the walk is in no module's time."""
        entry = self._inputs.pop()
        if entry is None:
            return
        heads = [t.grad_fn for t in tensors(out) if t.requires_grad and t.grad_fn is not None]
        if heads:
            self._done.append((module, heads, *entry))

    def forward_done(self) -> None:
        """The top-level forward returned: hook the nodes of each module call, innermost call first."""
        node_calls: dict[Any, list[_Call]] = {}
        for module, heads, inputs, bound in self._done:
            nodes = _created(heads, inputs, bound)
            if not nodes:
                continue
            call = _Call(module, len(nodes))
            for node in nodes:
                calls = node_calls.get(node)
                if calls is None:
                    calls = node_calls[node] = []
                    node.register_prehook(self._pre_hook(calls))
                    node.register_hook(self._post_hook(calls))
                calls.append(call)
        self._done.clear()

    def _pre_hook(self, calls: list[_Call]) -> Callable[[Any], None]:
        def pre(_grad_outputs: Any) -> None:
            if not self._active():
                return
            if not self._flush_queued:
                import torch

                torch.autograd.Variable._execution_engine.queue_callback(self._flush)
                self._flush_queued = True
            for call in reversed(calls):  # the outermost module's call was added last
                if not call.open:
                    call.open, call.left = True, call.nodes
                    self._open.append(call)
                    self._start(call.module)

        return pre

    def _post_hook(self, calls: list[_Call]) -> Callable[[Any, Any], None]:
        def post(_grad_inputs: Any, _grad_outputs: Any) -> None:
            if not self._active():
                return
            for call in calls:  # innermost first
                if call.open:
                    call.left -= 1
                    if call.left == 0:
                        self._close(call)

        return post

    def _close(self, call: _Call) -> None:
        call.open = False
        self._open.remove(call)
        self._stop(call.module)

    def _flush(self) -> None:
        """The backward ended: a call some of whose nodes did not run ends here."""
        self._flush_queued = False
        for call in reversed(list(self._open)):
            if self._active():
                self.unfinished += 1
                self._close(call)
            else:
                call.open = False
        self._open.clear()


def _seq(node: Any) -> int:
    return -1 if type(node).__name__ == ACCUMULATE else int(node._sequence_nr())


def _created(heads: list[Any], inputs: set[Any], bound: int) -> list[Any]:
    """The autograd nodes from ``heads`` (a call's outputs') back to its inputs' (made after ``bound``)."""
    todo = list(heads)
    seen: set[Any] = set()
    found = []
    while todo:
        node = todo.pop()
        if node is None or node in inputs or node in seen or type(node).__name__ == ACCUMULATE:
            continue
        seen.add(node)
        if _seq(node) <= bound:  # made before the module's inputs were: not its work
            continue
        found.append(node)
        todo.extend(f for f, _ in node.next_functions)
    return found
