"""The metadata every backend writes at the top of a Profile: model, backend, options, machine."""

from __future__ import annotations

import datetime as _dt
import os
from typing import TYPE_CHECKING, Any

from layerperf import __version__
from layerperf.data.machine import fingerprint

if TYPE_CHECKING:
    from layerperf.backends.base import RunPlan
    from layerperf.models.source import ModelSource


def metadata(source: ModelSource | dict[str, Any], plan: RunPlan, backend: str, backend_version: str,
             provider: str | None, options: dict[str, Any]) -> dict[str, Any]:
    """``source``: the model's file, or a description (name, path...) of a model that is not one."""
    model = source if isinstance(source, dict) else source.describe()
    zoo = not isinstance(source, dict) and source.zoo
    return {
        "layerperf_version": __version__,
        "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "pid": os.getpid(),
        "model": {**model, **({"zoo_options": plan.zoo_options} if zoo else {})},
        "backend": backend,
        "backend_version": backend_version,
        "provider": provider,
        "options": options,
        "machine": fingerprint(),
    }
