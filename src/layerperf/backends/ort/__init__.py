"""The ONNX Runtime backend: per-node timings from ONNX Runtime's own profiler, in situ.

Its modules: :mod:`.options` (``--opt-level``, ``--provider``, checked), :mod:`.driver` (one profile,
start to end), :mod:`.measure` (the profile's sessions: their options, the profiled runs split under
the profiler's event limit, the plain runs interleaved with them, the optimized graph),
:mod:`.session` (the :class:`~.session.Session` class every ONNX Runtime session of layerperf is: its
errors in one line, the element types numpy lacks), :mod:`.layers` (profile events + optimized graph
-> layers with shapes and cost), :mod:`.counting` and :mod:`.stepwise` (perf counters node by node in
a worker process), :mod:`.memory` (the arena's and the process's memory in a fresh session),
:mod:`.single_op` (one operator or one node in isolation, for ``bench`` and ``calibrate``),
:mod:`.names` (the profiler's node names), :mod:`.scope` (control-flow bodies). The trace format is
read by :mod:`layerperf.readers.ort`. onnxruntime itself is imported only when something runs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

from layerperf.backends.base import Availability, RunPlan, SingleOp
from layerperf.backends.ort.options import OPT_LEVEL_NAMES, ORT_MAX_EVENTS, OrtOptions

if TYPE_CHECKING:
    from layerperf.collectors import Collectors
    from layerperf.data.profile import Profile

__all__ = ["OPT_LEVEL_NAMES", "ORT_MAX_EVENTS", "OnnxRuntimeBackend", "OrtOptions"]


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

    def single_op(self) -> SingleOp:
        from layerperf.backends.ort.single_op import OrtSingleOp

        return OrtSingleOp()
