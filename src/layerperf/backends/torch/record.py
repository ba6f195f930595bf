"""One untimed pass over the model: which modules run, in which order, on which tensors, doing what work.

The modules become the profile's layers in the order they first start (a parent before what it
calls); each keeps the shapes and dtypes of its first call. The aten ops the pass dispatches are
attributed to the innermost module running them — its *self* work, as its self time excludes its
children's — with FLOPs, integer operations and bytes as the cost model's aten namespace counts them
(:mod:`layerperf.cost.aten`: the ONNX op each stands for, one multiply-add = 2 FLOPs, and
torch.utils.flop_counter's formulas for the attention kernels it leaves to torch; the bytes of the tensor
arguments and results, none for a view such as ``t``, ``view``, ``expand``: a result aliasing an argument
it does not write). An op with no formula that does arithmetic makes its module's FLOPs unknown (None),
never 0; integer work likewise, as the cost model counts it (an op
whose tensors are all integer or boolean is integer operations, not FLOPs). The hooks are each
module's own, with its keyword arguments: a submodule called with them has them among its inputs.
"""

from __future__ import annotations

import inspect
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from layerperf.backends.torch.compiled import named_modules
from layerperf.cost.aten import live as aten_live
from layerperf.data.tensor import TensorInfo


@dataclass(slots=True)
class Seen:
    """What one module did in the recorded pass."""

    path: str
    op_type: str
    parent: int | None  # index (in first-call order) of the enclosing module, None at top level
    inputs: tuple[TensorInfo, ...] = ()
    outputs: tuple[TensorInfo, ...] = ()
    param_bytes: int = 0
    flops: int | None = 0
    bytes_read: int = 0
    bytes_written: int = 0
    unknown_ops: set[str] = field(default_factory=set)  # computing ops with no FLOP formula
    int_ops: int | None = 0  # integer work; None once an integer op with no formula ran
    unknown_int_ops: set[str] = field(default_factory=set)  # integer ops with no formula
    domain: str | None = None  # an ONNX node's (a module run for one, see from_onnx); None for a module
    attrs: dict[str, Any] | None = None
    ops: list[str] = field(default_factory=list)  # the aten ops it ran itself, in order
    calls: int = 0  # how often it ran in the recorded pass: its work above is the sum over them

    def per_call(self) -> tuple[int | None, int, int, int | None]:
        """FLOPs, bytes read, bytes written and int ops of one call (the mean over the pass's calls, as
        a layer's figures are per call: a ReLU module used twice did half its pass's work each time)."""
        n = max(self.calls, 1)

        def mean(v: int | None) -> int | None:
            return None if v is None else round(v / n)

        return mean(self.flops), round(self.bytes_read / n), round(self.bytes_written / n), mean(self.int_ops)


tensor_info = aten_live.info  # a tensor's name, shape and element type, as the cost model sees it


def tensors(value: Any) -> list[Any]:
    import torch
    from torch.utils._pytree import tree_leaves

    return [t for t in tree_leaves(value) if isinstance(t, torch.Tensor)]


class Recorder:
    """Hooks and a dispatch mode for one pass; :attr:`seen` the modules in first-call order."""

    def __init__(self, modules: dict[int, tuple[str, Any]], input_names: dict[int, tuple[str, Any]]) -> None:
        self.modules = modules  # id -> (path, module)
        self.seen: list[Seen] = []
        self.order: dict[int, int] = {}  # module id -> index in seen
        self.stack: list[int] = []
        self.names: dict[int, tuple[str, Any]] = dict(input_names)  # tensor id -> (name, tensor kept alive)
        self.root_ops: list[str] = []
        self.root_unknown: set[str] = set()
        self.root_row = False  # the root module is a row of its own (seen[0]), its children under it

    def _name(self, t: Any, fallback: str) -> str:
        known = self.names.get(id(t))
        return known[0] if known is not None and known[1] is t else fallback

    def pre(self, mod: Any, args: Any, kwargs: Any) -> None:
        entry = self.modules.get(id(mod))
        if entry is None:
            return
        i = self.order.get(id(mod))
        if i is None:
            path = entry[0]
            i = self.order[id(mod)] = len(self.seen)
            ins = tensors((args, kwargs))
            own = getattr(mod, "layerperf_io", None)
            names = own[0] if own else [self._name(t, f"{path}:in{k}") for k, t in enumerate(ins)]
            params = sum(p.numel() * p.element_size() for p in mod.parameters(recurse=False))
            self.seen.append(Seen(path, getattr(mod, "layerperf_op_type", type(mod).__name__),
                                  self.stack[-1] if self.stack else None,
                                  tuple(tensor_info(n, t) for n, t in zip(names, ins, strict=False)), (), params,
                                  domain=getattr(mod, "layerperf_domain", None), attrs=getattr(mod, "attrs", None)))
        self.seen[i].calls += 1
        self.stack.append(i)

    def post(self, mod: Any, args: Any, kwargs: Any, out: Any) -> None:
        if id(mod) not in self.modules:
            return
        i = self.stack.pop()
        seen = self.seen[i]
        if seen.outputs:
            return
        outs = tensors(out)
        own = getattr(mod, "layerperf_io", None)
        names = own[1] if own else [seen.path if len(outs) == 1 else f"{seen.path}:{k}" for k in range(len(outs))]
        seen.outputs = tuple(tensor_info(n, t) for n, t in zip(names, outs, strict=False))
        for n, t in zip(names, outs, strict=False):
            self.names.setdefault(id(t), (n, t))  # the innermost producer names a tensor its parents pass on

    def op(self, func: Any, args: Any, kwargs: Any, out: Any) -> None:
        seen = self.seen[self.stack[-1]] if self.stack else None
        if seen is None:
            self.root_ops.append(func.overloadpacket.__name__)
            unknown = Seen("", "", None)
            add_op(unknown, func, args, kwargs, out)
            self.root_unknown |= unknown.unknown_ops | unknown.unknown_int_ops
            return
        add_op(seen, func, args, kwargs, out)


def add_op(seen: Seen, func: Any, args: Any, kwargs: Any, out: Any) -> None:
    """One aten op's work onto ``seen``, as the cost model's aten namespace counts it
    (:func:`layerperf.cost.aten.live.cost`): its FLOPs, integer operations and the bytes of its tensor
    arguments and results. With no formula, the kind of work it does is unknown (None), never 0."""
    name = func.overloadpacket.__name__
    seen.ops.append(name)
    cost = aten_live.cost(func, args, kwargs, out)
    seen.bytes_read += cost.bytes_read or 0
    seen.bytes_written += cost.bytes_written or 0
    if cost.int_ops is None:
        seen.unknown_int_ops.add(name)
        seen.int_ops = None
    elif seen.int_ops is not None:
        seen.int_ops += cost.int_ops
    if cost.flops is None:
        seen.unknown_ops.add(name)
        seen.flops = None
    elif seen.flops is not None:
        seen.flops += cost.flops


_INPUT_WHEN_EVAL = frozenset(("dropout", "feature_dropout", "alpha_dropout", "feature_alpha_dropout"))


def _training(args: Any, kwargs: dict[str, Any]) -> bool:
    """A dropout's ``train`` argument (input, p, train)."""
    if "train" in kwargs:
        return bool(kwargs["train"])
    return bool(args[2]) if len(args) > 2 else True


def counting_mode(on_op: Any) -> Any:
    """A dispatch mode calling ``on_op(func, args, kwargs, out)`` for each aten op that runs; a composite
    op (conv2d, linear...) is counted as the ops it stands for, which have FLOP formulas."""
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils.flop_counter import flop_registry

    class Mode(TorchDispatchMode):
        def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
            kwargs = kwargs or {}
            if func.overloadpacket.__name__ in _INPUT_WHEN_EVAL and not _training(args, kwargs):
                # a dropout in eval returns its input itself, as eagerly run (nothing runs, nothing moves);
                # its decomposition would copy it
                return func(*args, **kwargs)
            if func.overloadpacket not in flop_registry:
                # the mode is off inside its own handler, so it is entered again for the parts
                with self:
                    out = func.decompose(*args, **kwargs)
                if out is not NotImplemented:
                    return out
            out = func(*args, **kwargs)
            on_op(func, args, kwargs, out)
            return out

    return Mode()


def root_name(module: Any, paths: set[str]) -> str:
    """The row of a model's own code (its root module's forward outside its children): the root's class
    name, ``<class> (model)`` where a submodule has that path."""
    name = type(module).__name__
    return name if name not in paths else f"{name} (model)"


def record(model: Any, call: Any, *, root: bool = False) -> Recorder:
    """Run ``call()`` once with the recorder's hooks and dispatch mode on ``model``'s modules (``root``:
    the root module too, its row named by :func:`root_name`).

    The hooks are each module's own, registered with ``with_kwargs=True`` for this one untimed pass:
    a module called with keyword arguments (``embeddings(input_ids=ids)``) has its tensors among its
    inputs, which the global hooks of the timed passes are not given."""
    own = getattr(model.module, "layerperf_paths", {})
    modules = {id(m): (own.get(id(m), path), m) for path, m in named_modules(model.module)}
    if root:
        modules = {id(model.module): (root_name(model.module, {p for p, _ in modules.values()}), model.module),
                   **modules}
    inputs = {id(t): (n, t) for n, t in input_names(model)}
    rec = Recorder(modules, inputs)
    rec.root_row = root
    with _kwargs_hooks([m for _, m in modules.values()], rec), counting_mode(rec.op):
        call()
    return rec


@contextmanager
def _kwargs_hooks(modules: list[Any], rec: Recorder) -> Iterator[None]:
    handles = []
    try:
        for m in modules:
            handles.append(m.register_forward_pre_hook(rec.pre, with_kwargs=True))
            handles.append(m.register_forward_hook(rec.post, with_kwargs=True, always_call=True))
        yield
    finally:
        for h in handles:
            h.remove()


def input_names(model: Any) -> list[tuple[str, Any]]:
    """The model's inputs by name, in call order: its positional arguments named after its forward's
    parameters (or ``input<k>``), then its keyword arguments."""
    try:
        params = list(inspect.signature(model.module.forward).parameters)
    except (TypeError, ValueError):
        params = []
    own = getattr(model.module, "layerperf_inputs", None)
    names = list(own) if own else params
    out = [(names[k] if k < len(names) else f"input{k}", a) for k, a in enumerate(model.args)]
    return out + list(model.kwargs.items())
