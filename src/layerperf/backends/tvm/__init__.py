"""The TVM backend: an ONNX model compiled with TVM's Relax stack (apache-tvm 0.27) and every call of
the Relax VM timed in situ, tied to the ONNX nodes it computes.

Its modules, in the order a profile uses them:

* :mod:`.options` — ``--target``, ``--pipeline``, ``--tune``, ``--compare``, ``--level`` (no TVM needed);
* :mod:`.runtime` — is TVM here (version, FFI, install line), threads, the CPU-affinity guard;
* :mod:`.target` / :mod:`.device` — ``--target`` in every form users know, checked runnable here;
* :mod:`.driver` — one profile, start to end;
* :mod:`.tuning` / :mod:`.database` / :mod:`.schedule` — MetaSchedule tuning, resumable, and the
  schedule each kernel got, as a typed record;
* :mod:`.importer` — ``from_onnx`` with each node's Relax bindings recorded;
* :mod:`.pipeline` — compile with a named pipeline, keeping the module after each Relax pass;
* :mod:`.mapping` — nodes followed through the passes to ``main``'s call sites (:mod:`.calls`);
* :mod:`.bytecode` — the VM bytecode read back (registers, frees);
* :mod:`.build` / :mod:`.cache` — import + compile + map, or the same build from disk;
* :mod:`.instrument` — the VM's instrument hook: per-call timing at levels 1 and 2, tensors, overhead;
* :mod:`.layers` / :mod:`.naming` / :mod:`.tensors` — the calls as layers: names ``diff`` pairs with
  other runtimes', op types, named tensors, work (:mod:`.kernel_cost`);
* :mod:`.memory` — storage and tensor allocations and frees, the two peaks.

Only :mod:`.options`, :mod:`.runtime`, :mod:`.target`, :mod:`.calls`, :mod:`.bytecode`,
:mod:`.memory`, :mod:`.cache`, :mod:`.kernel_cost`, :mod:`.naming`, :mod:`.tensors` and
:mod:`.schedule` import without TVM; the others import it at their top, so this package (the backend
class) needs no TVM until a profile runs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

from layerperf.backends.base import Availability, RunPlan
from layerperf.backends.tvm.options import TvmOptions
from layerperf.backends.tvm.runtime import availability, require_tvm

if TYPE_CHECKING:
    from layerperf.collectors import Collectors
    from layerperf.data.profile import Profile

__all__ = ["TvmBackend", "TvmOptions", "availability"]


class TvmBackend:
    name: ClassVar[str] = "tvm"
    summary: ClassVar[str] = ("TVM (Relax): the ONNX model compiled for --target, each VM call timed in situ at the "
                              "VM's instrument hook and tied to the ONNX nodes it computes; MetaSchedule tuning")
    model_suffixes: ClassVar[tuple[str, ...]] = ()  # ONNX files default to ONNX Runtime
    options_type: ClassVar[type] = TvmOptions

    def availability(self) -> Availability:
        return availability()

    def profile(self, model: Any, plan: RunPlan, options: Any, collectors: Collectors) -> Profile:
        require_tvm()
        from layerperf.backends.tvm.driver import profile

        return profile(model, plan, options, collectors)

    def single_op(self) -> None:
        """None: one operator in isolation is not measured on TVM (yet); `layerperf bench` refuses it."""
        return None

    def check_options(self, options: TvmOptions) -> None:
        """InputError, in one line, for a target that does not parse, TVM refuses or cannot run here."""
        require_tvm()
        from layerperf.backends.tvm.device import runnable_target

        runnable_target(options.target)

    def baseline(self, options: TvmOptions) -> TvmOptions | None:
        """``--compare``: the options of the build the profile is compared with (the untuned one)."""
        return options.untuned() if options.compare else None
