"""The work of a training run's rows: one more forward and backward of the model, untimed, on the first
timed run's inputs, counting what each module's forward and each module call's backward computes.

The forward runs in the model's own mode (training: batch statistics, dropout) with the recorder of
:mod:`.record` (shapes, FLOPs, bytes of each forward row); the backward is taken from the model's
outputs with gradients of ones (``torch.autograd.grad``: no ``.grad`` is written), its aten ops
counted as the forward's are (:func:`.record.add_op`: torch.utils.flop_counter's formulas for ``mm``,
``convolution_backward``..., :mod:`.aten_cost`'s for ``threshold_backward``, the normalizations'
backward, a bias gradient's ``sum``...; an op that computes with neither makes its row's FLOPs
unknown) and given to the innermost module call whose backward is running (:mod:`.backward`),
its *self* work as a forward row's is. A FLOP count depends on shapes only, so the gradients' values
do not matter; the loss is not re-run, so its backward row stays unknown. The model's buffers
(BatchNorm's running statistics) and the random generator's state are put back afterwards.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from layerperf.backends.torch.backward import BackwardCalls
from layerperf.backends.torch.record import Recorder, Seen, _tensors, add_op, counting_mode, record


def grad_pass(model: Any) -> tuple[Recorder, dict[str, Seen]]:
    """The forward rows' record, and each backward row's work by row name (``<path> (backward)``)."""
    import torch

    root = model.module
    paths = {id(m): p for p, m in root.named_modules() if p}
    back: dict[str, Seen] = {}
    running: list[Seen] = []

    def start(mod: Any) -> None:
        name = f"{paths[id(mod)]} (backward)"
        seen = back.setdefault(name, Seen(name, f"{type(mod).__name__} (backward)", None))
        seen.calls += 1
        running.append(seen)

    def stop(mod: Any) -> None:
        name = f"{paths[id(mod)]} (backward)"
        for k in range(len(running) - 1, -1, -1):
            if running[k].path == name:
                del running[k]
                break

    calls = BackwardCalls(start, stop, lambda: True)
    outs: list[Any] = []

    def forward() -> None:
        outs.append(root(*model.args, **model.kwargs))

    def on_op(func: Any, args: Any, kwargs: Any, out: Any) -> None:
        if running:
            add_op(running[-1], func, args, kwargs, out)

    with untouched(root), _node_hooks(calls, paths), torch.enable_grad():
        rec = record(model, forward)
        heads = [t for t in _tensors(outs[0]) if t.requires_grad]
        params = [p for p in root.parameters() if p.requires_grad]
        if heads and params:
            with counting_mode(on_op):
                torch.autograd.grad(heads, params, grad_outputs=[torch.ones_like(t) for t in heads],
                                    allow_unused=True)
    return rec, back


@contextmanager
def _node_hooks(calls: BackwardCalls, paths: dict[int, str]) -> Iterator[None]:
    from layerperf.backends.torch.hooks import forward_hooks

    depth = [0]

    def pre(mod: Any, args: Any) -> None:
        depth[0] += 1
        calls.forward_pre(args, id(mod) in paths)

    def post(mod: Any, args: Any, out: Any) -> None:
        depth[0] -= 1
        calls.forward_post(mod, out)
        if depth[0] == 0:
            calls.forward_done()

    with forward_hooks(pre, post):
        yield


@contextmanager
def untouched(root: Any) -> Iterator[None]:
    """The module's buffers and the random generators as they were, whatever runs inside."""
    import torch

    saved = [(b, b.detach().clone()) for b in root.buffers()]
    devices = list(range(torch.cuda.device_count())) if torch.cuda.is_initialized() else []
    with torch.random.fork_rng(devices=devices):
        try:
            yield
        finally:
            with torch.no_grad():
                for b, copy in saved:
                    b.copy_(copy)
