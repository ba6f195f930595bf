"""Compiling a Relax module with a named pipeline, keeping the module after each Relax pass.

The pipelines (what ``--pipeline`` will take):

``default``
    ``relax.get_default_pipeline(target)``: legalize, fold constants, fuse (FuseOps + FuseTIR), then
    the target's scheduling (GPU: dlight's default schedules; CPU: none) and the VM lowering.
``unfused``
    the same without FuseOps and FuseTIR: one kernel per legalized op.
``legalize``
    what ``tvm.compile(mod, target)`` does by default: legalization and VM lowering only (no constant
    folding, no fusion, no schedules). Very slow on CPU; given for comparison with TVM's own default.

A tuned build applies a MetaSchedule database right after fusion (before any default scheduling),
as TVM's ``static_shape_tuning`` pipeline does. The modules kept along the way are what
:mod:`.mapping` follows ONNX nodes through, up to the last pass that still has dataflow bindings.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import tvm
from tvm import relax

from layerperf.backends.tvm.importer import tvm_error_types
from layerperf.backends.tvm.options import PIPELINES
from layerperf.errors import BackendError, InputError

__all__ = ["PIPELINES", "Compiled", "Snapshots", "compile_module", "passes", "tunable_module"]
# Passes the legalize pipeline adds to the lowering (tvm.compile's default has no FoldConstant/FuseOps).
_FUSION = ("FuseOps", "FuseTIR")
# After this pass the bindings are lowered out of dataflow form; the mapping needs none later.
LAST_KEPT = "RewriteDataflowReshape"


@dataclass(slots=True)
class Snapshots:
    """The module after each pass, by pass name, in pipeline order (up to :data:`LAST_KEPT`)."""

    modules: list[tuple[str, Any]] = field(default_factory=list)

    def keep(self, name: str) -> Any:
        @tvm.transform.module_pass(opt_level=0, name=f"layerperf.keep.{name}")
        def _keep(mod: Any, _ctx: Any) -> Any:
            self.modules.append((name, mod))
            return mod

        return _keep

    def names(self) -> list[str]:
        return [n for n, _ in self.modules]

    def last(self) -> Any:
        return self.modules[-1][1]

    def tunable(self) -> Any:
        """The module the tuned schedules apply to (after fusion, or legalization and folding): where
        the kernels' unscheduled PrimFuncs are, as the tuning database knows them."""
        names = self.names()
        for anchor in _ANCHORS:
            if anchor in names:
                return self.modules[names.index(anchor)][1]
        raise BackendError("the compile kept no module after legalization to read the schedules from")


def _pass_name(p: Any) -> str:
    return str(p.info.name)


def _backend(target: Any) -> Any:
    """The module of TVM's per-target pass lists. ``relax.pipeline.dataflow_lower_passes`` cannot be
    used: it asks ``backend.cpu_generic`` for a name only ``backend.cpu_generic.pipeline`` has (0.27)."""
    from tvm.relax.backend import cpu_generic, cuda, gpu_generic, rocm

    kind = target.kind.name
    if kind == "llvm":
        return cpu_generic.pipeline
    if kind in ("cuda", "rocm"):
        return cuda.pipeline if kind == "cuda" else rocm.pipeline
    if "gpu" in target.keys:
        return gpu_generic.pipeline
    raise InputError(f"TVM has no Relax pipeline for target kind '{kind}'", hint="use --target llvm or cuda")


def _stages(target: Any, pipeline: str) -> list[Any]:
    pl = _backend(target)
    legalize = pl.legalize_passes(target)
    if pipeline == "legalize":
        legalize = [p for p in legalize if _pass_name(p) == "LegalizeOps"]
    elif pipeline == "unfused":
        legalize = [p for p in legalize if _pass_name(p) not in _FUSION]
    elif pipeline != "default":
        raise InputError(f"unknown TVM pipeline '{pipeline}'", hint="one of: " + ", ".join(PIPELINES))
    return [*pl.library_dispatch_passes(target), *legalize, *pl.dataflow_lower_passes(target),
            *pl.finalize_passes(target)]


# the passes after which tuned schedules go in, the first found: fusion, else folding, else legalization
_ANCHORS = ("FuseTIR", "FoldConstant", "LegalizeOps")


def _database_after(passes: list[Any]) -> int:
    """Index after which the tuned schedules go in: after fusion, or after legalization/folding."""
    names = [_pass_name(p) for p in passes]
    for anchor in _ANCHORS:
        if anchor in names:
            return names.index(anchor)
    raise BackendError("the pipeline has no legalization pass to apply tuned schedules after")


def passes(target: Any, pipeline: str, database_dir: str | None, snapshots: Snapshots) -> list[Any]:
    """The pipeline's passes, with the tuning database applied (when given) and a snapshot after each
    pass up to :data:`LAST_KEPT`."""
    stages = _stages(target, pipeline)
    if database_dir is not None:
        at = _database_after(stages) + 1
        stages.insert(at, relax.transform.MetaScheduleApplyDatabase(database_dir))
    out: list[Any] = [snapshots.keep("import")]
    keeping = True
    for p in stages:
        out.append(p)
        if keeping:
            out.append(snapshots.keep(_pass_name(p)))
            keeping = _pass_name(p) != LAST_KEPT
    return out


def recording_pipeline(target: Any, pipeline: str, database_dir: str | None, snapshots: Snapshots) -> Any:
    """One module pass running :func:`passes` inside the target's context (as TVM's own pipelines do)."""
    with target:  # MetaScheduleApplyDatabase takes the target from the context it is made in
        seq = passes(target, pipeline, database_dir, snapshots)

    @tvm.transform.module_pass(opt_level=0, name=f"layerperf.{pipeline}")
    def _pipeline(mod: Any, _ctx: Any) -> Any:
        with target:
            return tvm.transform.Sequential(seq)(mod)

    return _pipeline


def tunable_module(mod: Any, target: Any, pipeline: str = "default") -> Any:
    """``mod`` after the passes that come before the tuned schedules go in (legalization, folding,
    fusion): the PrimFuncs MetaSchedule tunes, and the ones its database is queried for."""
    stages = _stages(target, pipeline)
    head = stages[: _database_after(stages) + 1]
    with target:
        return tvm.transform.Sequential(head)(mod)


@dataclass(frozen=True, slots=True)
class Compiled:
    """An executable, the modules its Relax passes left, and how long the compile took."""

    executable: Any  # tvm.relax.VMExecutable
    snapshots: Snapshots
    compile_s: float


def compile_module(mod: Any, target: Any, pipeline: str = "default", database_dir: str | None = None) -> Compiled:
    """Compile ``mod`` for ``target`` with ``pipeline``; BackendError in one line when TVM fails."""
    snapshots = Snapshots()
    relax_pipeline = recording_pipeline(target, pipeline, database_dir, snapshots)
    t0 = time.perf_counter()
    try:
        ex = tvm.compile(mod, target=target, relax_pipeline=relax_pipeline)
    except tvm_error_types() as exc:
        text = str(exc).strip()
        lines = [ln for ln in text.splitlines() if ln.strip()]
        first = lines[-1] if lines and lines[0].startswith("Traceback") else (lines[0] if lines else type(exc).__name__)
        raise BackendError(f"TVM failed to compile the model for {target.kind.name} "
                           f"(pipeline {pipeline}): {first[:300]}") from None
    return Compiled(ex, snapshots, time.perf_counter() - t0)
