"""Where a PyTorch model comes from: a built-in model name, ``path/to/file.py:factory``, a module object
(or a module and its inputs), or an ONNX file run node by node; and the inputs it is called with."""

from __future__ import annotations

import importlib.util
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from layerperf.backends.base import RunPlan
from layerperf.backends.torch.compiled import compiled_note, compiled_parts, original
from layerperf.backends.torch.from_onnx import onnx_module
from layerperf.errors import BackendError, InputError


@dataclass(slots=True)
class TorchModel:
    """A module, the positional and keyword inputs it is called with, and what to say of it."""

    module: Any  # torch.nn.Module
    args: tuple[Any, ...]
    kwargs: dict[str, Any] = field(default_factory=dict)
    description: dict[str, Any] = field(default_factory=dict)
    zoo: bool = False
    onnx: Any = None  # the ONNX model the module was built from, if any
    warnings: list[str] = field(default_factory=list)


def load(model: Any, plan: RunPlan) -> TorchModel:
    """The module to profile and its inputs; InputError (one line) for anything unusable."""
    import torch

    if isinstance(model, tuple) and len(model) == 2 and isinstance(model[0], torch.nn.Module):
        return _checked(_given(model[0], model[1], {"name": type(model[0]).__name__}, plan))
    if isinstance(model, torch.nn.Module):
        return _checked(_given(model, None, {"name": type(model).__name__}, plan))
    if not isinstance(model, str | Path):
        raise InputError(f"the torch backend takes an nn.Module, a built-in model name, FILE.py:FACTORY or an "
                         f".onnx file, not {type(model).__name__}")
    text = str(model)
    if text.lower().endswith(".onnx"):
        return _onnx(text, plan)
    if ".py:" in text or text.endswith(".py"):
        return _checked(_factory(text, plan))
    return _checked(_zoo(text, plan))


def _zoo(name: str, plan: RunPlan) -> TorchModel:
    import onnx
    import torch

    from layerperf.models.inputs import make_feed, onnx_input_specs
    from layerperf.models.source import open_model
    from layerperf.models.zoo.torch_models import build_torch

    source = open_model(name, **plan.zoo_options)  # the ONNX form: its weights and inputs are the module's
    proto = onnx.load(str(source.path))  # the weights too (the zoo's file keeps them inside)
    module = build_torch(name, proto)
    feed = make_feed(proto, onnx_input_specs(proto), plan.shapes, plan.inputs_file, plan.seed)
    args = tuple(torch.from_numpy(feed[i.name]) for i in proto.graph.input if i.name in feed)
    return TorchModel(module, args, {}, source.describe() | {"zoo_options": plan.zoo_options}, zoo=True)


def _onnx(path: str, plan: RunPlan) -> TorchModel:
    """The ONNX file as a module of node modules (:mod:`.from_onnx`), and its inputs (layerperf's seeded feed)."""
    import onnx
    import torch

    from layerperf.models.inputs import make_feed, onnx_input_specs
    from layerperf.models.source import open_model

    source = open_model(path)
    proto = onnx.load(str(source.path))
    specs = onnx_input_specs(proto)
    names = [s.name for s in specs]
    module = onnx_module(proto, path, names)
    feed = make_feed(proto, specs, plan.shapes, plan.inputs_file, plan.seed)
    args = tuple(torch.from_numpy(feed[n]) for n in names)
    return TorchModel(module, args, {}, source.describe(), onnx=proto)


def _factory(spec: str, plan: RunPlan) -> TorchModel:
    """``file.py:factory``: the factory's module, or its (module, inputs)."""
    import torch

    path_text, _, attr = spec.rpartition(":") if ".py:" in spec else (spec, "", "")
    path = Path(path_text)
    if not attr:
        raise InputError(f"no factory named in '{spec}'", hint="give FILE.py:FACTORY, a callable returning the "
                         "module or (module, example_inputs)")
    if not path.is_file():
        raise InputError(f"model file not found: {path}")
    factory = getattr(_import_file(path), attr, None)
    if not callable(factory):
        raise InputError(f"{path} has no callable '{attr}'")
    try:
        made = factory()
    except Exception as exc:  # the user's code: any failure is theirs to read, in one line
        raise InputError(f"{spec}: the factory raised {type(exc).__name__}: {one_line(exc)}") from None
    desc = {"name": f"{path.stem}:{attr}", "path": str(path.resolve())}
    if isinstance(made, torch.nn.Module):
        return _given(made, None, desc, plan)
    if isinstance(made, tuple) and len(made) == 2 and isinstance(made[0], torch.nn.Module):
        return _given(made[0], made[1], desc, plan)
    raise InputError(f"{spec}: the factory returned {type(made).__name__}, not an nn.Module or "
                     "(nn.Module, example_inputs)")


def _import_file(path: Path) -> Any:
    name = f"layerperf_user_model_{abs(hash(str(path.resolve())))}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise InputError(f"cannot import {path} as Python")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    try:
        spec.loader.exec_module(mod)
    except Exception as exc:
        sys.modules.pop(name, None)
        raise InputError(f"{path}: importing it raised {type(exc).__name__}: {one_line(exc)}") from None
    return mod


def _given(module: Any, inputs: Any, desc: dict[str, Any], plan: RunPlan) -> TorchModel:
    """The module with the inputs given (a tensor, a tuple of them, or a dict of keywords), else made
    from ``--shape NAME=DIMS`` (float32 random, seeded; positional in the order given)."""
    import torch

    if inputs is None:
        args: tuple[Any, ...] = _from_shapes(plan)
        kwargs: dict[str, Any] = {}
    elif isinstance(inputs, dict):
        args, kwargs = (), dict(inputs)
    elif isinstance(inputs, tuple | list):
        args, kwargs = tuple(inputs), {}
    else:
        args, kwargs = (inputs,), {}
    if plan.shapes and inputs is not None:
        raise InputError("--shape applies to a model given without example inputs",
                         hint="the factory returned its own inputs")
    del torch
    return TorchModel(module, args, kwargs, desc)


def _from_shapes(plan: RunPlan) -> tuple[Any, ...]:
    import torch

    from layerperf.models.inputs import parse_shapes

    if not plan.shapes:
        raise InputError("the model comes without example inputs",
                         hint="return (module, inputs) from the factory, or give --shape NAME=DIMS")
    gen = torch.Generator().manual_seed(plan.seed)
    return tuple(torch.randn(dims, generator=gen) for dims in parse_shapes(plan.shapes).values())


def _checked(model: TorchModel) -> TorchModel:
    parts = compiled_parts(model.module)
    if parts:  # profiled through the module it compiles, eagerly (see compiled.py)
        model.module = original(model.module)
        model.warnings.extend(compiled_note(parts))
    if model.module.training:
        model.warnings.append(f"{model.description.get('name', 'the model')} is in training mode (dropout and "
                              "batch-norm statistics update): call .eval() to profile inference")
    return model


def one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return text[:300] + ("…" if len(text) > 300 else "")


def forward_failed(exc: BaseException, model: TorchModel, where: str | None = None) -> BackendError:
    """The module's forward failing on its inputs, in torch's own words, one line; ``where``: which call
    of the model (``call 3 of the model (warm-up run 2)``)."""
    shapes = ", ".join("x".join(map(str, a.shape)) for a in model.args if hasattr(a, "shape"))
    name = model.description.get("name", "the model")
    at = f" {where}:" if where else ""
    return BackendError(f"{name}:{at} forward failed on inputs [{shapes}]: {type(exc).__name__}: {one_line(exc)}")
