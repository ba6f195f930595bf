"""Profiler ranges at module boundaries: each run one torch.profiler range (``layerperf::run``), each
module call one inside it (``layerperf::<layer>``), and the names read back from the profiler's events.

The profiler stamps the ranges on the clock and thread it stamps the ops with, so a module's time is
its range's, and an op's module is the innermost range holding it in the profiler's own event tree:
exact, with no second clock to map. Level 2 (:mod:`.level2`, and :mod:`layerperf.torch` at level 2)
and the memory runs (:mod:`.memory`) mark their modules so.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

MARK = "layerperf::"
RUN_MARK = "layerperf::run"
RETURN_MARK = "layerperf::return"


def _marks(index: dict[int, int] | None) -> tuple[Callable[..., None], Callable[..., None]]:
    """A profiler range per layer call (``layerperf::<layer>``); ``index`` None: layers made as they run.
    The memory pass's marks (:mod:`.memory`)."""
    # torch's C++ range object (0.6 µs a range under the profiler here) rather than the profiler's
    # enter/exit ops, which are dispatcher calls recorded with their arguments (21 µs a range)
    import torch

    fast = getattr(torch._C._profiler, "_RecordFunctionFast", None)
    stacks: dict[int, list[tuple[int, Any]]] = {}  # per thread: a range opened on one is closed on it
    names = {i: f"{MARK}{i}" for i in (index or {}).values()}
    get_ident = threading.get_ident

    def name_of(i: int, stack: list[tuple[int, Any]]) -> str:
        # a module called inside its own call (recursion) gets ``layerperf::<layer>#<depth>``: torch's
        # event list folds a range into a parent of the same name when it is that parent's only child
        depth = sum(1 for j, _ in stack if j == i) if stack and stack[-1][0] == i else 0
        if depth:
            return f"{MARK}{i}#{depth}"
        name = names.get(i)
        if name is None:
            name = names[i] = f"{MARK}{i}"
        return name

    if fast is not None:
        def enter(name: str) -> Any:
            r = fast(name)
            r.__enter__()
            return r

        def leave(r: Any) -> None:
            r.__exit__(None, None, None)
    else:
        def enter(name: str) -> Any:
            return torch.ops.profiler._record_function_enter_new(name, None)

        leave = torch.ops.profiler._record_function_exit

    def start(i: int) -> None:
        stack = stacks.setdefault(get_ident(), [])
        stack.append((i, enter(name_of(i, stack))))

    def stop(i: int) -> None:
        stack = stacks.get(get_ident())
        if not stack or stack[-1][0] != i:
            return  # not opened on this thread (or already closed): nothing to close here
        leave(stack.pop()[1])

    return start, stop


def mark_layer(name: str) -> int | None:
    """The layer of a module range's name (``layerperf::12``, ``layerperf::12#1`` for a recursive call);
    None for another name (the run, a return mark, anything else)."""
    if not name.startswith(MARK):
        return None
    rest = name[len(MARK):].partition("#")[0]
    return int(rest) if rest.isdigit() else None


class Ranges:
    """Level 2's boundaries (a collector, see :mod:`layerperf.collectors.boundary`): each run a profiler
    range ``layerperf::run``, each module call a range ``layerperf::<layer>`` inside it (torch's C++
    range object, :func:`_marks`). The profiler stamps them on the clock it stamps the ops with, on the
    same thread, so an op's module is the innermost range holding it: its ancestor in the profiler's
    own event tree, with no clocks to align."""

    def __init__(self, index: dict[int, int] | None = None) -> None:
        import torch

        self.start, self.stop = _marks(index)
        self._range = getattr(torch._C._profiler, "_RecordFunctionFast", torch.autograd.profiler.record_function)
        self._run: list[Any] = []

    def begin_pass(self) -> None:
        r = self._range(RUN_MARK)
        r.__enter__()
        self._run.append(r)

    def end_pass(self) -> None:
        if self._run:
            self._run.pop().__exit__(None, None, None)

    def model_returned(self) -> None:
        """An empty range ``layerperf::return`` where the model returned (a run of a ``with`` block ends
        there or at its last row, whichever is later: its range closes only at the next model call)."""
        r = self._range(RETURN_MARK)
        r.__enter__()
        r.__exit__(None, None, None)


def cpu_marks(events: Any, name: str = RUN_MARK) -> list[Any]:
    """The profiler's events named ``name`` on the CPU, by start: the ranges themselves, not the copies
    that the CUDA activity adds on the GPU's timeline (gpu_user_annotation)."""
    from torch.autograd import DeviceType

    return sorted((e for e in events if e.name == name and e.device_type == DeviceType.CPU),
                  key=lambda e: e.time_range.start)
