"""The ONNX Runtime backend: per-node timings from ONNX Runtime's own profiler, in situ.

Its modules: :mod:`.driver` (one profile, start to end), :mod:`.sessions` (session options, the
profiled and plain sessions, interleaved runs), :mod:`.trace` (ONNX Runtime's profile events ->
runs), :mod:`.layers` (events + optimized graph -> layers with shapes and cost), :mod:`.counting`
and :mod:`.stepwise` (perf counters node by node in a worker process), :mod:`.memory` (the arena's
and the process's memory in a fresh session), :mod:`.session`, :mod:`.names`, :mod:`.scope`.
onnxruntime itself is imported only when a profile runs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from layerperf.backends.base import Availability, RunPlan, option

if TYPE_CHECKING:
    from layerperf.collectors import Collectors
    from layerperf.data.profile import Profile

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


class OnnxRuntimeBackend:
    name: ClassVar[str] = "onnxruntime"
    summary: ClassVar[str] = ("ONNX Runtime: each node of the optimized graph, timed by ONNX Runtime's profiler "
                              "in situ; counters node by node (stepwise executor); arena memory")
    model_suffixes: ClassVar[tuple[str, ...]] = (".onnx",)
    options_type: ClassVar[type] = OrtOptions

    def availability(self) -> Availability:
        try:
            import onnxruntime
        except ImportError as exc:
            return Availability(False, None, f"onnxruntime does not import: {exc}")
        return Availability(True, onnxruntime.__version__)

    def profile(self, model: Any, plan: RunPlan, options: Any, collectors: Collectors) -> Profile:
        from layerperf.backends.ort.driver import profile

        return profile(model, plan, options, collectors)
