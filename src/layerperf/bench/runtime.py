"""The runtime a measurement runs on: a backend's single-operator capability, and its options.

``bench`` and ``calibrate`` know no runtime: they find a backend by name in the registry and use its
:class:`~layerperf.backends.base.SingleOp`. Their ``opt_level`` and ``provider`` set the backend's
options of those names (ONNX Runtime's ``--opt-level`` and ``--provider``); a backend without such
options runs on its own defaults.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from layerperf import backends
from layerperf.backends.base import NodeGraph, SingleOp, option_fields

AS_WRITTEN = "disable"  # the optimization level that runs a model as written
MOST_OPTIMIZED = "all"  # the level whose graph holds every fused node

GraphAt = Callable[[str], NodeGraph]  # the graph the runtime executes at an optimization level


def runner(backend: str) -> SingleOp:
    """``backend``'s single-operator capability; InputError (one line) where it has none or cannot run."""
    return backends.single_op(backend)


def runtime_options(backend: str, opt_level: str, provider: str) -> Any:
    """``backend``'s options at ``opt_level`` on ``provider`` (where it has options of those names), checked."""
    options_type = backends.get(backend).options_type
    names = {f.name for f in option_fields(options_type)}
    given = {"opt_level": opt_level, "provider": provider}
    options = options_type(**{k: v for k, v in given.items() if k in names})
    validate = getattr(options, "validate", None)
    if validate is not None:
        validate()
    return options
