"""The TVM backend's core: an ONNX model compiled with TVM's Relax stack (apache-tvm 0.27) and every
call of the Relax VM timed in situ, tied to the ONNX nodes it computes.

Phase 1 (these modules) is the machinery; wiring it into the Backend protocol, the shared backend
parts and ``compare`` comes next. The modules, in the order a profile uses them:

* :mod:`.runtime` — is TVM here (version, FFI, install line), threads, the CPU-affinity guard;
* :mod:`.target` / :mod:`.device` — ``--target`` in every form users know, checked runnable here;
* :mod:`.importer` — ``from_onnx`` with each node's Relax bindings recorded;
* :mod:`.pipeline` — compile with a named pipeline, keeping the module after each Relax pass;
* :mod:`.mapping` — nodes followed through the passes to ``main``'s call sites (:mod:`.calls`);
* :mod:`.bytecode` — the VM bytecode read back (registers, frees);
* :mod:`.build` / :mod:`.cache` — import + compile + map, or the same build from disk;
* :mod:`.instrument` — the VM's instrument hook: per-call timing at levels 1 and 2, tensors, overhead;
* :mod:`.memory` — storage and tensor allocations and frees, the two peaks;
* :mod:`.kernel_cost` — a call's FLOPs (its nodes') and bytes (its arguments');
* :mod:`.tuning` / :mod:`.database` / :mod:`.schedule` — MetaSchedule tuning, resumable, and the
  schedule each kernel got, as a typed record.

Only :mod:`.runtime`, :mod:`.target`, :mod:`.calls`, :mod:`.bytecode`, :mod:`.memory`, :mod:`.cache`,
:mod:`.kernel_cost` and :mod:`.schedule` import without TVM; the others import it at their top, so
importing this package needs no TVM.
"""

from __future__ import annotations

from layerperf.backends.tvm.runtime import availability

__all__ = ["availability"]
