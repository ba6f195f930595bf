"""ONNX Runtime's own options (``--opt-level``, ``--provider``), and the one place they are checked."""

from __future__ import annotations

from dataclasses import dataclass, field

from layerperf.backends.base import option
from layerperf.errors import InputError

OPT_LEVEL_NAMES = ("disable", "basic", "extended", "all")
ORT_MAX_EVENTS = 1_000_000


@dataclass(frozen=True, slots=True)
class OrtOptions:
    """ONNX Runtime's own options."""

    opt_level: str = field(default="all", metadata=option("ONNX Runtime graph optimization level (default all)",
                                                           choices=OPT_LEVEL_NAMES))
    provider: str = field(default="CPUExecutionProvider", metadata=option("execution provider"))
    # events ONNX Runtime's profiler records per session before it stops; long runs are split across sessions
    max_events: int = field(default=ORT_MAX_EVENTS, metadata=option("profiler events per session", flag=False))

    def validate(self) -> None:
        """InputError for an unknown optimization level or a provider this ONNX Runtime lacks."""
        if self.opt_level not in OPT_LEVEL_NAMES:
            raise InputError(f"unknown --opt-level '{self.opt_level}'", hint="one of: " + ", ".join(OPT_LEVEL_NAMES))
        import onnxruntime as ort

        available = ort.get_available_providers()
        if self.provider not in available:
            raise InputError(f"execution provider '{self.provider}' is not available in this ONNX Runtime",
                             hint="available: " + ", ".join(available))
