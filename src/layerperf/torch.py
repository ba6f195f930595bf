"""Profile PyTorch code where it runs: a ``with`` block, a decorator, or ``start()``/``stop()``.

>>> with layerperf.torch.Profiler() as prof:          # doctest: +SKIP
...     model(x)
>>> prof.profile.save("out")                          # doctest: +SKIP

Every module called inside is timed at its boundaries (forward hooks), by its path under the
outermost module called (``layer1.0.conv1``); each call of that module is one run. The first
``warmup`` runs are left out. When the profile ends, the first timed run's inputs are run once more,
untimed and in inference mode, for each module's shapes, FLOPs and bytes (modules in training mode
are not re-run: their FLOPs stay unknown). Only level 1 (modules) is offered here; counters and the
memory profile come with ``layerperf profile --backend torch``.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

from layerperf.backends.torch import INSTALL_HINT, import_torch
from layerperf.errors import InputError
from layerperf.profile_data import Layer, Profile

__all__ = ["INSTALL_HINT", "Profiler", "profile"]

F = TypeVar("F", bound=Callable[..., Any])
FORMATS = ("trace.json", "layers.csv")


class Profiler:
    """Times every module called between :meth:`start` and :meth:`stop` (or inside ``with``).

    ``level``: 1 (modules; the only level offered in code, see the module doc). ``warmup``: runs of the
    outermost module to leave out. ``path``: a directory the profile is saved to when it ends;
    ``formats``: which of its files (trace.json, layers.csv; default both).
    """

    def __init__(self, *, level: int = 1, warmup: int = 0, path: str | Path | None = None,
                 formats: Sequence[str] | None = None) -> None:
        if level != 1:
            raise InputError(f"layerperf.torch.Profiler offers level 1 (modules) only, got {level!r}",
                             hint="level 2 (aten ops) runs with layerperf profile --backend torch --level 2")
        if warmup < 0:
            raise InputError(f"warmup must be 0 or more, got {warmup}")
        bad = [f for f in (formats or ()) if f not in FORMATS]
        if bad:
            raise InputError(f"unknown format {bad[0]!r}", hint="one of: " + ", ".join(FORMATS))
        self._torch = import_torch()
        self.warmup, self.path, self.formats = warmup, path, tuple(formats or FORMATS)
        self._state = _State(warmup)
        self._handles: list[Any] = []
        self._profile: Profile | None = None

    def start(self) -> Profiler:
        from torch.nn.modules import module as torch_module

        if self._handles:
            raise InputError("this Profiler is already started")
        state = self._state
        self._handles = [torch_module.register_module_forward_pre_hook(state.pre),
                         torch_module.register_module_forward_hook(state.post, always_call=True)]
        return self

    def stop(self) -> Profile:
        """End the profile: hooks off, shapes and FLOPs taken, saved to ``path`` when given."""
        for h in self._handles:
            h.remove()
        self._handles = []
        self._profile = self._state.build()
        if self.path is not None:
            _save(self._profile, Path(self.path), self.formats)
        return self._profile

    def __enter__(self) -> Profiler:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def profile(self) -> Profile:
        """The profile, once stopped."""
        if self._profile is None:
            raise InputError("the profile is not ended yet: call stop() or leave the with block first")
        return self._profile


class _State:
    """What the hooks keep: the modules by id, their first-call order, the timing collector's reads."""

    def __init__(self, warmup: int) -> None:
        from layerperf.collectors.timing import Timing

        self.timing = Timing()
        self.warmup = warmup
        self.root: Any = None
        self.paths: dict[int, str] = {}
        self.index: dict[int, int] = {}
        self.order: list[tuple[str, Any]] = []
        self.depth = 0
        self.tid = threading.get_ident()
        self.calls = 0
        self.first: tuple[tuple[Any, ...], dict[str, Any]] | None = None

    def _adopt(self, mod: Any) -> None:
        """``mod`` called with nothing running: the root (its calls are the runs), or another top module."""
        if self.root is None:
            self.root = mod
            self.paths.update({id(m): p for p, m in mod.named_modules() if p})
            return
        prefix = type(mod).__name__
        self.paths.setdefault(id(mod), prefix)
        for p, m in mod.named_modules():
            if p:
                self.paths.setdefault(id(m), f"{prefix}.{p}")

    def pre(self, mod: Any, args: Any) -> None:
        if threading.get_ident() != self.tid:
            return
        if self.depth == 0:
            if id(mod) not in self.paths and mod is not self.root:
                self._adopt(mod)
            if mod is self.root:
                self.calls += 1
                if self.calls > self.warmup:
                    if self.first is None:
                        self.first = (tuple(args), {})
                    self.timing.begin_pass()
        self.depth += 1
        if self.calls <= self.warmup:
            return
        i = self.index.get(id(mod))
        if i is None and id(mod) in self.paths:
            i = self.index[id(mod)] = len(self.order)
            self.order.append((self.paths[id(mod)], mod))
        if i is not None:
            self.timing.start(i)

    def post(self, mod: Any, args: Any, out: Any) -> None:
        if threading.get_ident() != self.tid:
            return
        self.depth -= 1
        if self.calls > self.warmup:
            i = self.index.get(id(mod))
            if i is not None:
                self.timing.stop(i)
            if self.depth == 0 and mod is self.root:
                self.timing.end_pass()

    def build(self) -> Profile:
        import torch

        from layerperf.backends.base import RunPlan
        from layerperf.profile_metadata import metadata

        layers = [Layer(name=path, op_type=type(mod).__name__, domain="torch.nn", provider="cpu",
                        param_bytes=sum(p.numel() * p.element_size() for p in mod.parameters(recurse=False)),
                        parent=_parent(path, {p for p, _ in self.order}))
                  for path, mod in self.order]
        warnings = self._costs(layers)
        desc = {"name": type(self.root).__name__ if self.root is not None else "?"}
        meta = metadata(desc, RunPlan(warmup=self.warmup, runs=max(self.timing.passes, 1)), "torch",
                        torch.__version__, "cpu", {"warmup": self.warmup, "level": 1, "in_situ": True})
        return Profile(metadata=meta, layers=layers, runs=self.timing.runs(), warnings=warnings)

    def _costs(self, layers: list[Layer]) -> list[str]:
        """Shapes, FLOPs and bytes from one more untimed call of the root on the first timed run's inputs."""
        from layerperf.backends.torch.models import TorchModel
        from layerperf.backends.torch.record import record

        if self.root is None or self.first is None:
            return ["no call of a module was profiled"]
        if self.root.training:
            return [f"{type(self.root).__name__} is in training mode: not re-run for shapes and FLOPs "
                    "(they stay unknown)"]
        import torch

        model = TorchModel(self.root, self.first[0], self.first[1])

        def call() -> Any:
            with torch.inference_mode():
                return self.root(*model.args)

        try:
            rec = record(model, call)
        except Exception as exc:  # the user's forward; the timings stand without the costs
            return [f"shapes and FLOPs unknown: re-running the model failed ({type(exc).__name__}: {exc})"]
        seen = {s.path: s for s in rec.seen}
        for layer in layers:
            s = seen.get(layer.name)
            if s is not None:
                layer.inputs, layer.outputs, layer.flops = s.inputs, s.outputs, s.flops
                layer.bytes_read, layer.bytes_written = s.bytes_read, s.bytes_written
        unknown = sorted({op for s in rec.seen for op in s.unknown_ops})
        return [f"FLOPs unknown for aten ops (no torch.utils.flop_counter formula): {', '.join(unknown)}"] \
            if unknown else []


def _parent(path: str, layers: set[str]) -> str | None:
    """The nearest enclosing module that is a layer (a container never called is not)."""
    while "." in path:
        path = path.rpartition(".")[0]
        if path in layers:
            return path
    return None


def _save(prof: Profile, out: Path, formats: Sequence[str]) -> None:
    """The chosen files of the profile, written atomically (nothing partial on failure)."""
    from layerperf.renderers.files import atomic_files, writers

    table = writers(prof)
    names = [n for n in table if n in formats]
    with atomic_files(out, names) as files:
        for name, f in zip(names, files, strict=True):
            table[name](prof, f)


def profile(*, level: int = 1, warmup: int = 0, path: str | Path | None = None,
            formats: Sequence[str] | None = None) -> Callable[[F], F]:
    """Decorate a function: every call of it runs under one Profiler, the runs aggregated; the
    function's ``.profiler`` ends it (``.profiler.stop()``), or the end of the process does, saving
    to ``path`` when given."""

    def wrap(fn: F) -> F:
        prof = Profiler(level=level, warmup=warmup, path=path, formats=formats)
        lock = threading.Lock()

        @functools.wraps(fn)
        def inner(*args: Any, **kwargs: Any) -> Any:
            with lock:
                if not prof._handles and prof._profile is None:
                    prof.start()
                    if path is not None:
                        import atexit

                        atexit.register(lambda: prof._handles and prof.stop())
            return fn(*args, **kwargs)

        inner.profiler = prof  # type: ignore[attr-defined]
        return inner  # type: ignore[return-value]

    return wrap
