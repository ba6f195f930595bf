"""The memory run on PyTorch: one pass under torch.profiler with ``profile_memory=True``, the modules'
forwards marked as profiler ranges, every allocation and free attributed to the innermost module
running at that moment (see :mod:`layerperf.analysis.memory.allocations`).

Events and ranges come from the profiler's event tree (its allocation records carry the address,
which pairs a free with its allocation); a range is ``layerperf::<layer>`` as at level 2
(:mod:`.ranges`), and the pass itself is ``layerperf::run``, so only what happened inside the model's
call counts. The backend runs one more pass of the model so (:func:`allocation_report`);
:mod:`layerperf.torch` records one run of the user's code (:mod:`layerperf.torch.memory_run`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace
from typing import Any

from layerperf.analysis.memory.allocations import AllocEvent, ModuleSpan, attribute
from layerperf.analysis.memory.report import analyze_memory, with_allocations
from layerperf.backends.torch.hooks import module_hooks
from layerperf.backends.torch.quiet_profiler import QuietProfiler, activities
from layerperf.backends.torch.ranges import RUN_MARK, Ranges, mark_layer
from layerperf.data.memory_report import Allocations, MemoryReport
from layerperf.data.profile import GraphSummary, Profile
from layerperf.errors import BackendError

SOURCE = "torch.profiler memory events (profile_memory=True), one pass"


def memory_profiler(device: str) -> QuietProfiler:
    """A torch.profiler session recording the allocator's events on ``device`` ("cpu", "cuda:N")."""
    return QuietProfiler(activities=activities(device), profile_memory=True)


def recorded_allocations(session: QuietProfiler, names: Sequence[str], device: str, *,
                         to_last_mark: bool = False) -> Allocations | None:
    """The allocations a stopped :func:`memory_profiler` session recorded, per module (``names``: the
    layers' names; ``to_last_mark``: see :func:`allocations_from`); None if it kept no results."""
    results = session.profiler.kineto_results if session.profiler is not None else None
    if results is None:
        return None
    return allocations_from(results.experimental_event_tree(), names, device, to_last_mark=to_last_mark)


class AllocationCapture:
    """Inside it, the module forwards in ``index`` (module id -> layer) are marked and torch.profiler
    records allocations; :meth:`allocations` attributes them afterwards. Put the model's call inside::

        with AllocationCapture(index) as cap:
            model(x)
        allocs = cap.allocations([layer.name for layer in layers])
    """

    def __init__(self, index: dict[int, int], device: str = "cpu") -> None:
        self.index = index
        self.device = device
        self._stack: list[Any] = []

    def __enter__(self) -> AllocationCapture:
        self._prof = memory_profiler(self.device)
        self._ranges = Ranges(self.index)
        self._hooks = module_hooks(self.index, self._ranges.start, self._ranges.stop)
        self._prof.__enter__()
        self._hooks.__enter__()
        self._ranges.begin_pass()
        return self

    def __exit__(self, *exc: Any) -> None:
        try:
            self._ranges.end_pass()
            self._hooks.__exit__(*exc)
        finally:
            self._prof.__exit__(*exc)

    def allocations(self, names: Sequence[str]) -> Allocations:
        """The pass's allocations on this capture's device, per module (``names``: the layers' names)."""
        allocs = recorded_allocations(self._prof, names, self.device)
        if allocs is None:
            raise BackendError("torch.profiler kept no results of the memory pass")
        return allocs


def allocations_from(tree: Sequence[Any], names: Sequence[str], device: str = "cpu", *,
                     to_last_mark: bool = False) -> Allocations:
    """The allocations of torch.profiler's event ``tree`` on ``device``, attributed to the marked modules;
    ``to_last_mark``: the pass ends where its last marked module call does (a ``with`` block's run,
    whose range closes only at the next model call), not where its range closes."""
    spans: list[ModuleSpan] = []
    events: list[AllocEvent] = []
    run: tuple[int, int] | None = None
    for node in _walk(tree):
        fields = node.extra_fields
        kind = type(fields).__name__
        if kind == "_ExtraFields_Allocation":
            if _device_name(fields.device) == device:
                events.append(AllocEvent(int(node.start_time_ns), int(fields.alloc_size), int(fields.ptr)))
        elif kind != "_ExtraFields_TorchOp":
            continue  # the CUDA activity's copies of the ranges on the GPU's timeline, kernels...
        elif node.name == RUN_MARK:
            if run is None:
                run = (int(node.start_time_ns), int(node.end_time_ns))
        elif (layer := mark_layer(node.name)) is not None:
            spans.append(ModuleSpan(layer, int(node.start_time_ns), int(node.end_time_ns)))
    if run is None:
        raise BackendError("torch.profiler recorded no range for the profiled pass (layerperf::run)")
    if to_last_mark:
        inside = [sp.end_ns for sp in spans if run[0] <= sp.start_ns <= run[1]]
        run = (run[0], max(inside, default=run[1]))
    return attribute(spans, events, names, start_ns=run[0], end_ns=run[1], device=device, source=SOURCE)


def _walk(nodes: Sequence[Any]) -> Iterator[Any]:
    todo = list(reversed(nodes))
    while todo:
        node = todo.pop()
        yield node
        todo.extend(reversed(node.children))


def _device_name(device: Any) -> str:
    """"cpu" or "cuda:N" for a torch.device (an allocation record's), as the capture names its device."""
    kind = str(getattr(device, "type", device))
    index = getattr(device, "index", None)
    return kind if kind == "cpu" or index is None else f"{kind}:{index}"


def allocation_report(call: Callable[[], Any], index: dict[int, int], profile: Profile,
                      device: str = "cpu") -> MemoryReport:
    """One more ``call()`` (one pass of the model) under an :class:`AllocationCapture` of the modules in
    ``index`` (module id -> index in ``profile.layers``); ``profile``'s memory report (the one the
    collectors made, or the analysis of its layers now) with those allocations in it. A profile with no
    graph section (model inputs and outputs unknown) gets the analysis as if the model had none, and a
    warning saying so."""
    with AllocationCapture(index, device) as cap:
        out = call()  # held to the pass's end, as a caller holds it: the outputs stay allocated
    del out
    allocs = cap.allocations([layer.name for layer in profile.layers])
    base = profile.memory
    if base is None and profile.graph is None:
        base = analyze_memory(replace(profile, graph=GraphSummary()))
        base = replace(base, warnings=(*base.warnings, "no graph section: the model's inputs and outputs are "
                                       "unknown, so the live tensors between layers are approximate"))
    elif base is None:
        base = analyze_memory(profile)
    return with_allocations(base, allocs)
