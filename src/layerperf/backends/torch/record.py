"""One untimed pass over the model: which modules run, in which order, on which tensors, doing what work.

The modules become the profile's layers in the order they first start (a parent before what it
calls); each keeps the shapes and dtypes of its first call. The aten ops the pass dispatches are
attributed to the innermost module running them — its *self* work, as its self time excludes its
children's — with FLOPs from torch.utils.flop_counter's formulas (one multiply-add = 2 FLOPs) or, for
the ops it has none for (elementwise, normalizations, softmax, pools, their backward), as the ONNX
cost model counts them (:mod:`layerperf.cost.aten`), and the bytes of their tensor arguments and results; a
view (``t``, ``view``, ``expand``...: a result aliasing an argument it does not write) moves no
bytes. An op with no formula that does arithmetic makes
its module's FLOPs unknown (None), never 0; integer work likewise, as the cost model counts it (an op
whose tensors are all integer or boolean is integer operations, not FLOPs). The hooks are each
module's own, with its keyword arguments: a submodule called with them has them among its inputs.
"""

from __future__ import annotations

import inspect
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from layerperf.cost import aten as aten_cost
from layerperf.data.tensor import TensorInfo

# aten ops that move, view, convert or make data but do no arithmetic: 0 FLOPs and 0 integer
# operations, known (as the cost model's data movement ops). ``_to_copy`` converts between dtypes:
# bytes, no FLOPs, as ONNX Cast. torch.utils.flop_counter has formulas for matmuls, convolutions and
# attention only; these are the ops with none that are known to compute nothing.
# ops that copy rows of their first argument picked by the others (as the cost model's Gather): what
# they read is the indices and an output's worth of the table (embedding's first argument is the table)
GATHERS = frozenset(("embedding", "index_select", "gather", "index", "take", "_unsafe_index"))
NO_ARITHMETIC = frozenset((
    "view", "_unsafe_view", "reshape", "t", "transpose", "permute", "expand", "expand_as", "flatten",
    "unflatten", "squeeze", "unsqueeze", "select", "slice", "split", "split_with_sizes", "chunk", "unbind",
    "narrow", "as_strided", "contiguous", "clone", "detach", "alias", "cat", "stack", "copy_", "_to_copy",
    "to", "lift_fresh", "empty", "empty_like", "zeros", "zeros_like", "ones", "ones_like", "full", "fill_",
    "arange", "embedding", "index_select", "gather", "index",
    "_reshape_alias", "masked_fill", "new_zeros", "new_empty", "new_ones", "zero_", "lift_fresh_copy",
    "view_as",
    # in place and copying forms of the views above, and more pure movement
    "detach_", "t_", "transpose_", "squeeze_", "unsqueeze_", "as_strided_", "resize_", "set_", "lift",
    "view_as_real", "view_as_complex", "view_copy", "expand_copy", "permute_copy", "slice_copy", "select_copy",
    "split_copy", "split_with_sizes_copy", "unbind_copy", "transpose_copy", "t_copy", "squeeze_copy",
    "unsqueeze_copy", "detach_copy", "alias_copy", "_reshape_copy", "copy", "fill", "masked_fill_", "new_full",
    "full_like", "empty_strided", "scalar_tensor", "_local_scalar_dense", "_record_function_enter_new",
    "select_backward", "slice_backward", "tril", "triu", "tril_", "triu_", "is_nonzero",
    "_record_function_enter", "_record_function_exit", "repeat", "flip", "roll",
    "constant_pad_nd", "select_scatter", "slice_scatter", "masked_select", "pixel_shuffle", "pixel_unshuffle",
    "channel_shuffle", "movedim", "moveaxis", "swapaxes", "diagonal", "unfold", "_unsafe_index",
    "resolve_conj", "resolve_neg", "_pin_memory", "upsample_nearest1d", "upsample_nearest2d",
    "upsample_nearest3d",
))


# Integer work with no flop_counter formula, counted as the cost model counts ONNX ops on integer
# tensors: an elementwise op 1 operation per output element (after broadcasting), a reduction or a scan
# 1 per input element. Only for ops whose tensors are all integer or boolean (see integer_op); the
# in-place form (``add_``) counts as its op.
INT_ELEMENTWISE = frozenset((
    "add", "sub", "rsub", "mul", "div", "floor_divide", "remainder", "fmod", "neg", "abs", "sign", "pow",
    "eq", "ne", "lt", "le", "gt", "ge", "maximum", "minimum", "clamp", "clamp_min", "clamp_max", "where",
    "bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_not", "bitwise_left_shift", "bitwise_right_shift",
    "logical_and", "logical_or", "logical_xor", "logical_not",
))
# (not max/min: one name for a reduction and an elementwise op, whose counts differ under broadcasting)
INT_PER_INPUT = frozenset(("sum", "prod", "any", "all", "amax", "amin", "argmax", "argmin", "cumsum", "cumprod"))


def integer_count(name: str, args: Any, kwargs: Any, out: Any) -> int | None:
    """Integer operations of an integer op with no flop_counter formula; None for one not listed."""
    base = name[:-1] if name.endswith("_") and not name.endswith("__") else name
    if base in INT_ELEMENTWISE:
        outs = tensors(out)
        return sum(t.numel() for t in outs) if outs else None
    if base in INT_PER_INPUT:
        ins = tensors((args, kwargs))
        return ins[0].numel() if ins else None
    return None


# what autograd itself dispatches with grad on (a saved tensor's detach): the model's work is the same
# without it, so a module's bytes in training mode are not made larger by it
AUTOGRAD_ONLY = frozenset(("detach",))


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


def _dtype(t: Any) -> str:
    return str(t.dtype).removeprefix("torch.")


def tensor_info(name: str, t: Any) -> TensorInfo:
    return TensorInfo(name, tuple(int(d) for d in t.shape), _dtype(t))


def tensors(value: Any) -> list[Any]:
    import torch
    from torch.utils._pytree import tree_leaves

    return [t for t in tree_leaves(value) if isinstance(t, torch.Tensor)]


def _nbytes(value: Any) -> int:
    # a tensor passed twice (``mul(x, x)``) is read once, as the cost model counts a node's inputs
    unique = {id(t): t for t in tensors(value)}
    return sum(t.numel() * t.element_size() for t in unique.values())


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


def integer_op(args: Any, kwargs: Any, out: Any) -> bool:
    """Whether an op works on integers: every tensor argument (or, with none, every result) is of an
    integer or boolean type. An op with a floating-point (or complex) operand is floating-point work,
    as in the cost model (layerperf.cost)."""
    found = tensors((args, kwargs)) or tensors(out)
    return bool(found) and not any(t.is_floating_point() or t.is_complex() for t in found)


def add_op(seen: Seen, func: Any, args: Any, kwargs: Any, out: Any) -> None:
    """One aten op's work onto ``seen``: its FLOPs and integer operations, and the bytes of its tensor
    arguments and results. An op moving data only counts 0 of both; one on integer tensors counts 0
    FLOPs and its formula's count (or :func:`integer_count`'s) as integer operations; a floating-point
    one its formula's FLOPs and 0 integer operations. With no formula, the kind of work it does is
    unknown (None), never 0."""
    from torch.utils.flop_counter import flop_registry

    name = func.overloadpacket.__name__
    seen.ops.append(name)
    if aten_cost.is_view(func):  # an alias of its input (t, view, expand, detach...): no data moves
        return
    if name in GATHERS:  # reads the rows it copies (an output's worth) and the indices, not the whole table
        seen.bytes_read += _nbytes((args[1:], kwargs)) + _nbytes(out)
        seen.bytes_written += _nbytes(out)
    elif name not in AUTOGRAD_ONLY:
        seen.bytes_read += _nbytes((args[1:], kwargs) if name in aten_cost.OVERWRITE else (args, kwargs))
        seen.bytes_written += _nbytes(out)
    formula = flop_registry.get(func.overloadpacket)
    if formula is None and name in NO_ARITHMETIC:
        return
    integer = integer_op(args, kwargs, out)
    count = None if integer else aten_cost.flops(func, args, kwargs, out)
    if count is None and formula is not None:
        count = int(formula(*args, **kwargs, out_val=out))
    if integer:
        count = integer_count(name, args, kwargs, out) if count is None else count
        if count is None:
            seen.unknown_int_ops.add(name)
            seen.int_ops = None
        elif seen.int_ops is not None:
            seen.int_ops += count
    elif count is None:
        seen.unknown_ops.add(name)
        seen.flops = None
    elif seen.flops is not None:
        seen.flops += count


def counting_mode(on_op: Any) -> Any:
    """A dispatch mode calling ``on_op(func, args, kwargs, out)`` for each aten op that runs; a composite
    op (conv2d, linear...) is counted as the ops it stands for, which have FLOP formulas."""
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils.flop_counter import flop_registry

    class Mode(TorchDispatchMode):
        def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
            kwargs = kwargs or {}
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


def record(model: Any, call: Any) -> Recorder:
    """Run ``call()`` once with the recorder's hooks and dispatch mode on ``model``'s modules (root aside).

    The hooks are each module's own, registered with ``with_kwargs=True`` for this one untimed pass:
    a module called with keyword arguments (``embeddings(input_ids=ids)``) has its tensors among its
    inputs, which the global hooks of the timed passes are not given."""
    own = getattr(model.module, "layerperf_paths", {})
    modules = {id(m): (own.get(id(m), path), m) for path, m in model.module.named_modules() if path}
    inputs = {id(t): (n, t) for n, t in input_names(model)}
    rec = Recorder(modules, inputs)
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
