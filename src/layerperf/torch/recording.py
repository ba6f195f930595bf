"""What :mod:`layerperf.torch` records while the user's own code runs: the rows (module forwards, their
backwards, optimizer steps), the runs, and the collectors called at every row's boundaries.

Rows are made as they first run, in that order: a module's forward is its path under the model
(``layer1.0.conv1``), its backward ``layer1.0.conv1 (backward)`` (see :mod:`.backward_hooks`), an optimizer's
step ``optimizer.step (SGD)``. A row's parent is the row open when it first started: a module's
forward sits under the enclosing module's, a backward under the enclosing module's backward, a module
called inside ``optimizer.step`` (a closure) under the step.

A run is one call of the decorated function (:meth:`Recording.begin_call` / :meth:`Recording.end_call`),
or in a ``with`` block one outermost call of the model (the first module called with none running)
together with what follows it until the next such call or the end: the loss, the backward and the
optimizer step of a training step. Such a run ends at its last boundary, not when the next begins, so
the time between steps is in no run.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from layerperf.backends.torch.compiled import compiled_note, compiled_parts, named_modules, original
from layerperf.backends.torch.hooks import OWN_CALLS, forward_hooks
from layerperf.backends.torch.record import root_name
from layerperf.torch.backward_hooks import BackwardCalls
from layerperf.torch.training_cost import tensor_specs

if TYPE_CHECKING:
    from layerperf.collectors import Collector
    from layerperf.torch.memory_run import AllocationRun

Boundary = Callable[[int], None]
FORWARD, BACKWARD, STEP = "forward", "backward", "step"


@dataclass(frozen=True, slots=True)
class Row:
    """One row of the profile as first seen: its name, type, what it times and its parent row."""

    name: str
    op_type: str
    domain: str
    kind: str
    owner: Any  # the module (forward, backward) or the optimizer (step)
    parent: int | None


class RunClock:
    """``perf_counter_ns`` that remembers its last reading, so a run can end at its last boundary."""

    def __init__(self) -> None:
        self.last = 0
        self._held: int | None = None

    def __call__(self) -> int:
        if self._held is not None:
            return self._held
        self.last = t = time.perf_counter_ns()
        return t

    @contextmanager
    def held_at_last(self) -> Iterator[None]:
        """Every reading inside gives the last one taken before."""
        self._held = self.last
        try:
            yield
        finally:
            self._held = None


def call_kwargs(mod: Any, depth: int = 8) -> dict[str, Any] | None:
    """The keyword arguments of the call of ``mod`` under way, from a global forward pre-hook (which
    torch passes the positional ones only): read in the frame of ``Module._call_impl`` that runs
    the hooks, whose locals hold them as passed. None where no such frame is found within ``depth``
    frames (a torch that calls hooks otherwise)."""
    import sys

    frame = sys._getframe(1)
    for _ in range(depth):
        if frame.f_code.co_name == "_call_impl" and frame.f_locals.get("self") is mod:
            kwargs = frame.f_locals.get("kwargs")
            return dict(kwargs) if isinstance(kwargs, dict) else None
        if frame.f_back is None:
            return None
        frame = frame.f_back
    return None


class Recording:
    """The rows and runs of one in-code profile. ``boundary``: the collector called at every row's
    start and stop (level 1: timing with counters and memory; level 2: a profiler range per row,
    :class:`~layerperf.backends.torch.ranges.Ranges`); ``runs_by_call``: runs are calls of the
    decorated function, not calls of the model."""

    def __init__(self, warmup: int, boundary: Collector, clock: RunClock, *, runs_by_call: bool,
                 capture: AllocationRun | None = None, root_row: bool = False) -> None:
        self.warmup = warmup
        self.root_row = root_row  # the model's own code is a row (level 1; at level 2 its ops are)
        self.boundary = boundary
        self.clock = clock
        self.runs_by_call = runs_by_call
        # a collector that marks the model's return on a timeline of its own (level 2's ranges)
        self._returned: Callable[[], None] | None = getattr(boundary, "model_returned", None)
        self.rows: list[Row] = []
        self.root: Any = None
        self.first: tuple[tuple[Any, ...], dict[str, Any]] | None = None
        self.kwargs_unread = False  # the first run's keyword arguments could not be read (see call_kwargs)
        # modules called outside the model (a loss), by id: the module and its first recorded call's
        # tensors' shapes (see training_cost.tensor_specs)
        self.outside_first: dict[int, tuple[Any, Any]] = {}
        self.calls = 0  # runs begun, warm-up ones included
        self.runs = 0
        self.extents: list[tuple[int, int]] = []  # (start, end) ns of each recorded run
        self.crossed: set[str] = set()
        self.compiled: list[str] = []  # the torch.compile'd modules met, profiled through their originals
        self.failures: list[str] = []  # the decorated function's calls that raised, said in one line each
        self.tid = threading.get_ident()
        self._paths: dict[int, str] = {}
        self._index: dict[tuple[str, int], int] = {}
        self._open: list[int] = []
        self._skip: dict[int, int] = {}
        self._depth = 0
        self._in_run = False
        self._run_start = 0
        self.backward = BackwardCalls(self._start_backward, self._stop_backward, lambda: self._in_run)
        # memory=True: the first run after warm-up is recorded under torch.profiler's memory events, its
        # rows marked as profiler ranges instead of the collectors' boundaries, and is no timed run
        self.capture = capture
        self.captured = False  # that run happened
        self._capturing = False
        self._on_start: Callable[[int], None] = boundary.start
        self._on_stop: Callable[[int], None] = boundary.stop

    # -- runs ---------------------------------------------------------------------------------------
    def begin_call(self) -> None:
        """A call of the decorated function begins: a run, unless it is a warm-up one."""
        self.calls += 1
        if self.calls > self.warmup:
            self._begin_run()

    def end_call(self) -> None:
        if self._in_run:
            self._end_run(held=False)

    def finish(self) -> None:
        """The profile ends: a run still open (a ``with`` block's last) ends at its last boundary."""
        if self._in_run:
            self._end_run(held=True)

    def abandon(self) -> None:
        """The profiled code raised: the run being recorded for memory closes its profiler session."""
        if self._capturing and self.capture is not None:
            self.capture.end()
            self._capturing = False
        self._in_run = False

    def _begin_run(self) -> None:
        self._in_run = True
        if self.capture is not None and self.capture.begin():
            self._capturing = True
            self._on_start, self._on_stop = self.capture.start, self.capture.stop
            return
        self._run_start = self.clock()
        self.boundary.begin_pass()

    def _end_run(self, *, held: bool) -> None:
        if self._capturing and self.capture is not None:
            while self._open:
                self._emit_stop(self._open.pop())
            self.capture.end()
            self._capturing = False
            self._on_start, self._on_stop = self.boundary.start, self.boundary.stop
            self.captured = True
            self._skip.clear()
            self._in_run = False
            return
        with self.clock.held_at_last() if held else nullcontext():
            while self._open:  # a row left open (a forward that never returned to its hook)
                self._emit_stop(self._open.pop())
            self.boundary.end_pass()
            end = self.clock()
        self._skip.clear()
        self.extents.append((self._run_start, end))
        self.runs += 1
        self._in_run = False

    # -- hooks ----------------------------------------------------------------------------------------
    @contextmanager
    def hooks(self) -> Iterator[None]:
        """Forward hooks on every module and step hooks on every optimizer, while inside."""
        from torch.optim import optimizer as torch_optim

        handles = [torch_optim.register_optimizer_step_pre_hook(self._step_pre),
                   torch_optim.register_optimizer_step_post_hook(self._step_post)]
        try:
            with forward_hooks(self._pre, self._post):
                yield
        finally:
            for h in handles:
                h.remove()

    def _mine(self) -> bool:
        """A call on this profile's thread, and not one layerperf makes itself (another profile's re-run
        for its FLOPs, see :func:`~layerperf.backends.torch.hooks.own_calls`)."""
        tid = threading.get_ident()
        return tid == self.tid and tid not in OWN_CALLS

    def _pre(self, mod: Any, args: Any) -> None:
        if not self._mine():
            return
        if self._depth == 0:
            self._top(mod, args)
        self._depth += 1
        track = self._in_run and id(mod) in self._paths
        self.backward.forward_pre(args, track)
        if track:
            self._start(self._row(FORWARD, mod))

    def _post(self, mod: Any, args: Any, out: Any) -> None:
        if not self._mine():
            return
        self._depth -= 1
        if self._in_run:
            i = self._index.get((FORWARD, id(mod)))
            if i is not None:
                self._stop(i)
            if self._depth == 0:
                self.clock()  # the model's return is a boundary of the run too
                if self._returned is not None:
                    self._returned()
        self.backward.forward_post(mod, out)
        if self._depth == 0:
            self.backward.forward_done()

    def _top(self, mod: Any, args: Any) -> None:
        """``mod`` called with no module running: the model (its calls are the runs of a with block),
        or another top-level module such as a loss, named by its class."""
        if self.root is None:
            self.root = mod
            model = original(mod)  # a compiled model's rows are its original module's (see backends/torch/compiled)
            self._paths.update({id(m): p for p, m in named_modules(model)})
            if self.root_row:
                self._paths[id(model)] = root_name(model, set(self._paths.values()))
            self.compiled += compiled_parts(mod)
        elif mod is not self.root and id(original(mod)) not in self._paths:
            model = original(mod)
            prefix = type(model).__name__
            self._paths[id(model)] = prefix
            for p, m in named_modules(model):
                self._paths.setdefault(id(m), f"{prefix}.{p}")
            self.compiled += [f"{prefix}.{c}" if c != prefix else c for c in compiled_parts(mod)]
        if mod is not self.root:
            key = id(original(mod))
            if self._in_run and key not in self.outside_first:  # a loss: its first call's shapes, for its work
                self.outside_first[key] = (original(mod), tensor_specs((tuple(args), call_kwargs(mod) or {})))
            return
        if not self.runs_by_call:
            if self._in_run:
                self._end_run(held=True)
            self.begin_call()
        if self._in_run and self.first is None:
            kwargs = call_kwargs(mod)
            if kwargs is None:
                self.kwargs_unread = True
            self.first = (tuple(args), kwargs or {})

    def path_of(self, mod: Any) -> str:
        """A module's row name (its path under the model, or under its class name outside it)."""
        return self._paths[id(mod)]

    def _step_pre(self, opt: Any, args: Any, kwargs: Any) -> None:
        if self._in_run and self._mine():
            self._start(self._row(STEP, opt))

    def _step_post(self, opt: Any, args: Any, kwargs: Any) -> None:
        if self._in_run and self._mine():
            i = self._index.get((STEP, id(opt)))
            if i is not None:
                self._stop(i)

    def _start_backward(self, mod: Any) -> None:
        self._start(self._row(BACKWARD, mod))

    def _stop_backward(self, mod: Any) -> None:
        self._stop(self._index[(BACKWARD, id(mod))])

    # -- rows and boundaries --------------------------------------------------------------------------
    def _row(self, kind: str, owner: Any) -> int:
        key = (kind, id(owner))
        i = self._index.get(key)
        if i is not None:
            return i
        parent = self._open[-1] if self._open else None
        cls = type(owner).__name__
        if kind == FORWARD:
            row = Row(self._paths[id(owner)], cls, "torch.nn", kind, owner, parent)
        elif kind == BACKWARD:
            name = f"{self._paths[id(owner)]} (backward)"
            row = Row(name, f"{cls} (backward)", "torch.autograd", kind, owner, parent)
        else:
            taken = {r.name for r in self.rows}
            name = base = f"optimizer.step ({cls})"
            k = 1
            while name in taken:  # a second optimizer of the same class
                k += 1
                name = f"{base} #{k}"
            row = Row(name, cls, "torch.optim", kind, owner, parent)
        i = self._index[key] = len(self.rows)
        self.rows.append(row)
        return i

    def _start(self, i: int) -> None:
        self._open.append(i)
        self._on_start(i)

    def _stop(self, i: int) -> None:
        """Stop row ``i``; rows opened inside it and still open (two autograd branches interleaved)
        end here too, and their own later stops are dropped, so spans always nest."""
        if self._skip.get(i):
            self._skip[i] -= 1
            return
        if i not in self._open:
            return  # started before the run began
        while self._open[-1] != i:
            j = self._open.pop()
            self._skip[j] = self._skip.get(j, 0) + 1
            self.crossed.add(self.rows[j].name)
            self._emit_stop(j)
        self._emit_stop(self._open.pop())

    def _emit_stop(self, i: int) -> None:
        self._on_stop(i)

    def warnings(self) -> list[str]:
        out = compiled_note(self.compiled)
        if self.crossed:
            names = sorted(self.crossed)
            out.append(f"{len(names)} row(s) cut short where autograd interleaved them with another module's "
                       f"backward (their span ends where the enclosing one did), e.g. {names[0]}")
        if self.backward.unfinished:
            out.append(f"{self.backward.unfinished} backward call(s) ended with the backward pass, not with their "
                       "last node (an output the loss did not use)")
        return out
