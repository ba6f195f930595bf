"""The work of a training run's rows: one more forward and backward of the model, untimed, on the first
timed run's inputs, counting what each module's forward and each module call's backward computes.

The forward runs in the model's own mode (training: batch statistics, dropout) with the recorder of
:mod:`layerperf.backends.torch.record` (shapes, FLOPs, bytes of each forward row); the backward is
taken from the model's outputs with gradients of ones (``torch.autograd.grad``: no ``.grad`` is
written), its aten ops counted as the forward's are (``record.add_op``: the cost model's aten
namespace, :mod:`layerperf.cost.aten`, for ``mm``, ``convolution_backward``, ``threshold_backward``,
the normalizations' backward, a bias gradient's ``sum``...; an op it has no formula for makes its
row's FLOPs unknown) and given to the innermost module call whose backward is running
(:mod:`.backward_hooks`), its *self* work as a forward row's is. A FLOP count depends on shapes only,
so the gradients' values do not matter. The model's buffers (BatchNorm's running statistics) and the
random generator's state are put back afterwards. A loss module (called outside the model) is re-run
on zeros of its first call's shapes, forward and backward (:func:`loss_costs`); an optimizer's step is
replayed on meta tensors (:func:`step_cost`).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from layerperf.backends.torch.compiled import named_modules
from layerperf.backends.torch.hooks import forward_hooks
from layerperf.backends.torch.record import (
    Recorder,
    Seen,
    add_op,
    counting_mode,
    record,
    root_name,
    tensor_info,
    tensors,
)
from layerperf.torch.backward_hooks import BackwardCalls


def grad_pass(model: Any) -> tuple[Recorder, dict[str, Seen]]:
    """The forward rows' record, and each backward row's work by row name (``<path> (backward)``)."""
    import torch

    root = model.module
    paths = {id(m): p for p, m in named_modules(root)}
    paths[id(root)] = root_name(root, set(paths.values()))
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
        rec = record(model, forward, root=True)
        heads = [t for t in tensors(outs[0]) if t.requires_grad]
        # the leaves the backward reaches: the parameters, and inputs that require a gradient themselves
        params = [p for p in root.parameters() if p.requires_grad]
        params += [t for t in tensors((model.args, model.kwargs)) if t.requires_grad and t.is_leaf]
        if heads and params:
            with counting_mode(on_op):
                torch.autograd.grad(heads, params, grad_outputs=[torch.ones_like(t) for t in heads],
                                    allow_unused=True)
    return rec, back


@contextmanager
def _node_hooks(calls: BackwardCalls, paths: dict[int, str]) -> Iterator[None]:
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


# -- the rows outside the model: a loss module's forward and backward, an optimizer's step -------------

def tensor_specs(value: Any) -> Any:
    """``value`` with each tensor replaced by its shape, strides, dtype, device and whether it requires a
    gradient (what a FLOP count needs; the values are not kept, nor the tensors held)."""
    import torch
    from torch.utils._pytree import tree_map

    def spec(x: Any) -> Any:
        if isinstance(x, torch.Tensor):
            return _Spec(tuple(x.shape), tuple(x.stride()), x.dtype, x.device, x.requires_grad)
        return x

    return tree_map(spec, value)


class _Spec:
    __slots__ = ("shape", "stride", "dtype", "device", "requires_grad")

    def __init__(self, shape: tuple[int, ...], stride: tuple[int, ...], dtype: Any, device: Any,
                 requires_grad: bool) -> None:
        self.shape, self.stride, self.dtype, self.device = shape, stride, dtype, device
        self.requires_grad = requires_grad


def _rebuild(specs: Any) -> Any:
    """Tensors of the recorded shapes, zeros (a class index of 0 is valid for any classification loss)."""
    import torch
    from torch.utils._pytree import tree_map

    def make(x: Any) -> Any:
        if isinstance(x, _Spec):
            t = torch.zeros(x.shape, dtype=x.dtype, device=x.device)
            return t.requires_grad_(x.requires_grad and (t.is_floating_point() or t.is_complex()))
        return x

    return tree_map(make, specs)


def loss_costs(mod: Any, name: str, specs: tuple[Any, Any], backward: bool) -> dict[str, Seen]:
    """The work of a module called outside the model (a loss), by row name: its forward on tensors of
    the first recorded call's shapes, and with ``backward`` its backward to the inputs that required a
    gradient (``<name> (backward)``), counted as the model's rows are."""
    import torch

    args, kwargs = _rebuild(specs)
    fwd = Seen(name, type(mod).__name__, None, calls=1)
    back = Seen(f"{name} (backward)", f"{type(mod).__name__} (backward)", None, calls=1)
    with untouched(mod), torch.enable_grad():
        with counting_mode(lambda f, a, k, o: add_op(fwd, f, a, k, o)):
            out = mod(*args, **kwargs)
        fwd.inputs = tuple(tensor_info(f"{name}:in{k}", t) for k, t in enumerate(tensors((args, kwargs))))
        fwd.outputs = tuple(tensor_info(f"{name}:out{k}", t) for k, t in enumerate(tensors(out)))
        ins = [t for t in tensors((args, kwargs)) if t.requires_grad]
        heads = [t for t in tensors(out) if t.requires_grad]
        if backward and ins and heads:
            with counting_mode(lambda f, a, k, o: add_op(back, f, a, k, o)):
                torch.autograd.grad(heads, ins, grad_outputs=[torch.ones_like(t) for t in heads], allow_unused=True)
    return {fwd.path: fwd, **({back.path: back} if backward and back.ops else {})}


# an optimizer's options that pick its batched or fused kernels (or graph capture): off in the replay
BATCHED = ("foreach", "fused", "capturable", "differentiable")


def step_cost(opt: Any, name: str) -> Seen:
    """The work of one step of optimizer ``opt``: the same class, hyperparameters and state, stepped on
    meta tensors of its parameters' shapes (nothing is computed or allocated) with its per-parameter
    loop (``foreach=False``, ``fused=False``: the same arithmetic as the batched kernels, in ops the
    cost model knows), counted as the model's rows are. A parameter is stepped if it has a gradient
    now, or, where none has (``zero_grad()`` cleared them), if it requires one."""
    import torch

    groups = []
    stepped = [p for g in opt.param_groups for p in g["params"] if p.grad is not None]
    use = set(map(id, stepped)) if stepped else {id(p) for g in opt.param_groups for p in g["params"]
                                                  if p.requires_grad}
    for g in opt.param_groups:
        params = []
        for p in g["params"]:
            c = torch.empty_like(p, device="meta").requires_grad_(p.requires_grad)
            if id(p) in use:
                c.grad = torch.empty_like(p, device="meta")
            params.append(c)
        options = {k: v for k, v in g.items() if k != "params"}
        options.update({k: False for k in BATCHED if k in options})
        groups.append({**options, "params": params})
    seen = Seen(name, type(opt).__name__, None, calls=1)
    replica = type(opt)(groups)
    state = opt.state_dict()  # its tensors are the optimizer's own: the replica gets copies (meta, or a
    if state.get("state"):  # scalar such as Adam's step count, which a step increments in place, cloned)
        def copy(v: Any) -> Any:
            if not isinstance(v, torch.Tensor):
                return v
            return v.clone() if v.numel() <= 1 else torch.empty_like(v, device="meta")

        state = {**state, "state": {k: {n: copy(v) for n, v in st.items()} for k, st in state["state"].items()}}
        replica.load_state_dict(state)  # which puts the saved options back: the flags off again
        for g in replica.param_groups:
            g.update({k: False for k in BATCHED if k in g})
    with torch.no_grad(), counting_mode(lambda f, a, k, o: add_op(seen, f, a, k, o)):
        replica.step()
    return seen
