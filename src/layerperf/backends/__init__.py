"""The backend registry: every runtime layerperf profiles on, by name.

A new backend is one module defining a class that follows :class:`~layerperf.backends.base.Backend`,
and one line in :data:`BUILTIN` (or a :func:`register` call, for a backend that lives outside
layerperf). Backends are imported only when used: the registry holds ``module:attribute`` strings.
A backend that can measure one operator in isolation says so through ``single_op()``
(:class:`~layerperf.backends.base.SingleOp`); :func:`single_op` finds it by name, or refuses. One
whose options can ask for a baseline build to compare with (TVM's untuned build) says so through
``baseline(options)`` (:func:`baseline_options`). One whose options can be checked before anything runs
beyond their own ``validate()`` (TVM's target, runnable here or not) says so through
``check_options(options)`` (:func:`check_options`).
"""

from __future__ import annotations

import dataclasses
import importlib
from pathlib import Path
from typing import TYPE_CHECKING, Any

from layerperf.errors import InputError

if TYPE_CHECKING:
    from layerperf.backends.base import Backend, SingleOp

BUILTIN: dict[str, str] = {
    "onnxruntime": "layerperf.backends.ort:OnnxRuntimeBackend",
    "torch": "layerperf.backends.torch:TorchBackend",
    "tvm": "layerperf.backends.tvm:TvmBackend",
}
DEFAULT = "onnxruntime"

_registry: dict[str, str | Backend] = dict(BUILTIN)


def register(name: str, backend: str | Backend) -> None:
    """Add (or replace) a backend: an object following the Backend protocol, or ``"module:attribute"``
    naming its class or instance, imported on first use."""
    _registry[name] = backend


def unregister(name: str) -> None:
    _registry.pop(name, None)


def names() -> list[str]:
    return list(_registry)


def get(name: str) -> Backend:
    """The backend registered as ``name``; InputError naming the known ones otherwise."""
    entry = _registry.get(name)
    if entry is None:
        raise InputError(f"unknown backend '{name}'", hint="one of: " + ", ".join(_registry))
    if isinstance(entry, str):
        module, _, attr = entry.partition(":")
        obj = getattr(importlib.import_module(module), attr)
        entry = obj() if isinstance(obj, type) else obj
        _registry[name] = entry
    return entry


def single_op(name: str) -> SingleOp:
    """The single-operator capability of the backend ``name``; InputError (one line) when it is unknown,
    cannot run here, or measures no single operator."""
    backend = get(name)
    avail = backend.availability()
    if not avail.usable:
        raise InputError(f"backend '{name}' cannot run here: {avail.reason}")
    runner = _single_op_of(backend)
    if runner is None:
        can = [n for n in _registry if n != name and _can_single_op(n)]
        raise InputError(f"backend '{name}' cannot measure one operator in isolation",
                         hint=("backends that can: " + ", ".join(can)) if can else None)
    return runner


def baseline_options(backend: Backend, options: Any) -> Any | None:
    """The options of the build a profile under ``options`` is compared with, when they ask for one
    (TVM's ``--compare``: the untuned build); None otherwise, and for a backend without the capability."""
    method = getattr(backend, "baseline", None)
    return method(options) if method is not None else None


def check_options(backend: Backend, options: Any) -> None:
    """InputError, in one line, for options no profile on ``backend`` could run with here: the options'
    own ``validate()``, then the backend's ``check_options`` where it has one (TVM: the target)."""
    validate = getattr(options, "validate", None)
    if validate is not None:
        validate()
    method = getattr(backend, "check_options", None)
    if method is not None:
        method(options)


def _single_op_of(backend: Backend) -> SingleOp | None:
    # a backend registered from outside, written before the capability, has no single_op(): it has none
    method = getattr(backend, "single_op", None)
    return method() if method is not None else None


def _can_single_op(name: str) -> bool:
    backend = get(name)
    return backend.availability().usable and _single_op_of(backend) is not None


def for_model(model: Any, name: str | None = None) -> Backend:
    """The backend ``name``, or the one whose model files ``model`` is (by suffix; ``FILE.py:FACTORY`` is a
    ``.py``), else the default. A ``.py`` factory given to a backend that does not take one is told in
    one line (InputError) naming those that do."""
    suffix = model_suffix(model)
    if name is not None:
        backend = get(name)
        if suffix == ".py" and suffix not in backend.model_suffixes:
            takers = [n for n in _registry if suffix in get(n).model_suffixes]
            raise InputError(f"{model} is a Python factory: .py factories run on "
                             f"{' or '.join('--backend ' + n for n in takers) or 'no backend registered'}, "
                             f"not --backend {name}")
        return backend
    if suffix:
        for candidate in _registry:
            backend = get(candidate)
            if suffix in backend.model_suffixes:
                return backend
    return get(DEFAULT)


def model_suffix(model: Any) -> str:
    """The lower-case suffix of the file a model spec names (``cnn.py:make`` -> ``.py``); "" for none."""
    if not isinstance(model, str | Path):
        return ""
    file_name = Path(str(model)).name.split(":", 1)[0]  # FILE.py:FACTORY names FILE.py
    return Path(file_name).suffix.lower()


def backend_options(backend: Backend, given: dict[str, Any]) -> Any:
    """The backend's typed options from keywords; an option it does not have is refused in one line."""
    known = {f.name for f in dataclasses.fields(backend.options_type)}
    unknown = sorted(set(given) - known)
    if unknown:
        raise InputError(f"the {backend.name} backend has no option {', '.join(map(repr, unknown))}",
                         hint="its options: " + (", ".join(sorted(known)) or "none"))
    return backend.options_type(**given)


def usable(backend: Backend) -> Backend:
    """``backend``, or one line saying why it cannot run here."""
    avail = backend.availability()
    if not avail.usable:
        raise InputError(f"backend '{backend.name}' is not usable here: {avail.reason}")
    return backend
