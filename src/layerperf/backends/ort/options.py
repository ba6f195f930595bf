"""ONNX Runtime's own options (``--opt-level``, ``--provider``), and the one place they are checked."""

from __future__ import annotations

from dataclasses import dataclass, field

from layerperf.backends.base import option
from layerperf.errors import InputError

OPT_LEVEL_NAMES = ("disable", "basic", "extended", "all")
EXECUTION_MODES = ("sequential", "parallel")
ORT_MAX_EVENTS = 1_000_000


@dataclass(frozen=True, slots=True)
class OrtOptions:
    """ONNX Runtime's own options."""

    opt_level: str = field(default="all", metadata=option("ONNX Runtime graph optimization level (default all)",
                                                           choices=OPT_LEVEL_NAMES))
    provider: str = field(default="CPUExecutionProvider", metadata=option("execution provider"))
    # events ONNX Runtime's profiler records per session before it stops; long runs are split across sessions
    max_events: int = field(default=ORT_MAX_EVENTS, metadata=option("profiler events per session", flag=False))
    # Parallel mode runs independent branches of the graph at once on an inter-op thread pool; each node
    # still uses the intra-op pool (--threads). A resource factor the dataset collector sweeps.
    execution_mode: str = field(default="sequential", metadata=option(
        "ONNX Runtime execution mode: sequential, or parallel (independent nodes at once on --inter-op-threads; "
        "default sequential)", choices=EXECUTION_MODES))
    inter_op_threads: int = field(default=0, metadata=option(
        "inter-op threads of the parallel execution mode (0: ONNX Runtime's default)"))

    def validate(self) -> None:
        """InputError for an unknown optimization level or a provider this ONNX Runtime lacks."""
        if self.opt_level not in OPT_LEVEL_NAMES:
            raise InputError(f"unknown --opt-level '{self.opt_level}'", hint="one of: " + ", ".join(OPT_LEVEL_NAMES))
        if self.execution_mode not in EXECUTION_MODES:
            raise InputError(f"unknown --execution-mode '{self.execution_mode}'",
                             hint="one of: " + ", ".join(EXECUTION_MODES))
        if self.inter_op_threads < 0:
            raise InputError(f"--inter-op-threads must be 0 (runtime default) or more, got {self.inter_op_threads}")
        if self.inter_op_threads and self.execution_mode != "parallel":
            raise InputError("--inter-op-threads applies to the parallel execution mode",
                             hint="add --execution-mode parallel")
        import onnxruntime as ort

        available = ort.get_available_providers()
        if self.provider not in available:
            raise InputError(f"execution provider '{self.provider}' is not available in this ONNX Runtime",
                             hint="available: " + ", ".join(available))
