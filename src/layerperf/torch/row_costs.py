"""The shapes, FLOPs and bytes of an in-code profile's rows, taken once the profile ends, untimed: the
model re-run on the first timed run's inputs (a forward, or with a backward the training pass of
:mod:`.training_cost`), each loss module re-run, each optimizer step replayed."""

from __future__ import annotations

from typing import Any

from layerperf.backends.torch.build import graph_summary, unknown_ops_warnings
from layerperf.backends.torch.models import TorchModel
from layerperf.backends.torch.record import Recorder, Seen, input_names, record
from layerperf.data.profile import GraphSummary, Layer
from layerperf.torch.recording import STEP, Recording
from layerperf.torch.training_cost import grad_pass, loss_costs, step_cost


def forward_costs(root: Any, first: tuple[tuple[Any, ...], dict[str, Any]] | None, layers: list[Layer],
                  names: set[str], *, grad: bool = False) -> tuple[list[str], GraphSummary | None]:
    """Shapes, FLOPs and bytes of the rows, from one more untimed call of the model on the first timed
    run's inputs: in inference mode for a model in eval mode whose backward did not run; otherwise
    (``grad``: a backward ran, or the model is in training mode) a forward and backward in the
    model's own mode, for the backward rows' work too (:mod:`.training_cost`). With the warnings, the
    model's graph summary (inputs, outputs, parameters)."""
    if root is None or first is None:
        return [], None  # no timed run: the profile says so (session.build)
    model = TorchModel(root, first[0], first[1])
    params = {name: p.numel() * p.element_size() for name, p in root.named_parameters()}
    bare = GraphSummary(tuple(n for n, _ in input_names(model)), (), params)
    import torch

    def call() -> Any:
        with torch.inference_mode():
            return root(*model.args, **model.kwargs)

    back: dict[str, Seen] = {}
    try:
        if grad or root.training:
            rec, back = grad_pass(model)
        else:
            rec = record(model, call, root=True)
    except Exception as exc:  # the user's forward; the timings stand without the costs
        return [f"shapes and FLOPs unknown: re-running the model failed ({type(exc).__name__}: {exc})"], bare
    _put(layers, {s.path: s for s in rec.seen if s.path in names}, "torch.nn")
    _put(layers, back, "torch.autograd")
    return _unknown_ops(rec, back), graph_summary(model, rec)


def outside_costs(recording: Recording, layers: list[Layer], names: set[str]) -> list[str]:
    """The work of the rows outside the model (see :mod:`.training_cost`): each loss module's forward and,
    where its backward row ran, its backward, on tensors of its first recorded call's shapes; each
    optimizer's step replayed on meta tensors. With warnings for what could not be counted."""
    warnings: list[str] = []
    done: list[Seen] = []
    for mod, specs in recording.outside_first.values():
        name = recording.path_of(mod)
        try:
            got = loss_costs(mod, name, specs, backward=f"{name} (backward)" in names)
        except Exception as exc:  # the user's module, re-run on zeros of the recorded shapes
            warnings.append(f"{name}: FLOPs unknown, re-running it failed ({type(exc).__name__}: {exc})")
            continue
        _put(layers, {k: v for k, v in got.items() if k == name}, "torch.nn")
        _put(layers, {k: v for k, v in got.items() if k != name}, "torch.autograd")
        done += got.values()
    for row in (r for r in recording.rows if r.kind == STEP):
        try:
            seen = step_cost(row.owner, row.name)
        except Exception as exc:  # an optimizer that cannot step on meta tensors
            warnings.append(f"{row.name}: FLOPs unknown, replaying the step failed ({type(exc).__name__}: {exc})")
            continue
        _put(layers, {row.name: seen}, "torch.optim")
        done.append(seen)
    return warnings + unknown_ops_warnings(done)


def _put(layers: list[Layer], seen: dict[str, Seen], domain: str) -> None:
    for layer in layers:
        s = seen.get(layer.name)
        if s is not None and layer.domain == domain:
            if domain == "torch.nn" and (s.inputs or s.outputs):
                layer.inputs, layer.outputs = s.inputs, s.outputs
            layer.flops, layer.bytes_read, layer.bytes_written, layer.int_ops = s.per_call()


def _unknown_ops(rec: Recorder, back: dict[str, Seen]) -> list[str]:
    return unknown_ops_warnings([*rec.seen, *back.values()])
