"""``torch.compile``d modules, profiled through the modules they compile, run eagerly.

layerperf times a module at its boundaries, and compiled code has none to time: the compiler traces
the modules into one graph and fuses their ops. Module hooks under dynamo make it worse: it guards on
the hooks it traced, so every hooked module call recompiles, and past dynamo's recompile limit the
calls fall back to eager, silently (a ``Linear(64, 64)`` read 27 ms a call, the profiler's overhead
x834). So while layerperf profiles, compiled code runs eagerly (``torch.compiler.set_stance
("force_eager")``: the compiled functions and modules run their original Python, nothing is compiled),
a compiled module's rows are those of its original module (``compiled._orig_mod``) under the original's
names, and the profile says so in a warning: its times are eager PyTorch's, not the compiled code's.
"""

from __future__ import annotations

import sys
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

WRAPPED = "_orig_mod"  # the attribute of a compiled module holding the module it compiles
# torch's warning when a compiled module runs under global hooks: those are layerperf's, and the profile
# runs the original module eagerly, so the hooks fire for it as they should
HOOKS_WARNING = r"Using `torch\.compile\(module\)` when there are global hooks"


def is_compiled(module: Any) -> bool:
    """Whether ``module`` is what ``torch.compile(module)`` returned (dynamo's ``OptimizedModule``)."""
    dynamo = sys.modules.get("torch._dynamo.eval_frame")  # not imported: nothing was compiled
    return dynamo is not None and isinstance(module, dynamo.OptimizedModule)


def original(module: Any) -> Any:
    """The module a compiled module compiles; any other module itself."""
    while is_compiled(module):
        module = getattr(module, WRAPPED)
    return module


def named_modules(root: Any) -> list[tuple[str, Any]]:
    """Every module under ``root`` (itself aside) with its path, as ``named_modules`` has them, but a
    compiled module's wrapper left out and its original named by the wrapper's path (``block``, not
    ``block._orig_mod``; ``block.fc`` under it)."""
    out = []
    for path, module in root.named_modules():
        if not path or is_compiled(module):
            continue
        name = _unwrapped(path)
        if name:
            out.append((name, module))
    return out


def _unwrapped(path: str) -> str:
    return ".".join(part for part in path.split(".") if part != WRAPPED)


def compiled_parts(root: Any) -> list[str]:
    """The compiled modules in ``root`` (itself included): its class name for itself, a path for one inside."""
    model = original(root)
    out = [type(model).__name__] if is_compiled(root) or _compiled_in_place(model) else []
    return out + [_unwrapped(path) for path, module in model.named_modules()
                  if path and (is_compiled(module) or _compiled_in_place(module))]


def _compiled_in_place(module: Any) -> bool:
    """``module.compile()``: the module itself, its calls compiled (run eagerly too while profiling)."""
    return getattr(module, "_compiled_call_impl", None) is not None


def compiled_note(parts: list[str]) -> list[str]:
    """The profile's warning on the compiled modules it profiled eagerly (none: no warning)."""
    if not parts:
        return []
    names = ", ".join(parts[:3]) + (f" and {len(parts) - 3} more" if len(parts) > 3 else "")
    return [f"torch.compile'd module(s) profiled through their original module (._orig_mod), run eagerly: {names}; "
            "the times are eager PyTorch's, not the compiled code's (the compiler fuses modules into kernels, "
            "leaving no module boundary to time; hooks inside compiled code would recompile it at each call)"]


@contextmanager
def eager() -> Iterator[None]:
    """While inside, compiled code runs eagerly and nothing is compiled (``torch.compiler.set_stance
    ("force_eager")``, torch 2.6 on; the torch extra pins 2.13)."""
    import torch

    with torch.compiler.set_stance("force_eager"):
        yield


@contextmanager
def hooks_warning_off() -> Iterator[None]:
    """While inside, torch's warning about global hooks on a compiled module is not shown: the hooks are
    layerperf's, and the original module runs eagerly, so they fire for it as they should. (The
    backend's, around its own code; in code the user's own warning filters are left alone.)"""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=HOOKS_WARNING, category=UserWarning)
        yield
