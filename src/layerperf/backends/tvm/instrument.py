"""Every VM call of a run timed in situ, through the Relax VM's instrument hook.

``vm.set_instrument(hook)`` makes the VM call ``hook(func, func_symbol, before_run, ret_value,
*args)`` before and after each call instruction — kernels and ``vm.builtin.*`` alike — with the
call's arguments (a kernel's inputs, then its outputs). The VM has no switch between the two: the
level picks which calls are layers and the hook skips the others with one list lookup.

* level 1: the kernels, and the builtins that do a node's work (``vm.builtin.reshape``);
* level 2: every call, the VM's own work (allocations, frees, shape checks) as rows of its own.

The hook calls a :class:`~layerperf.collectors.Collector`'s ``start(layer)``/``stop(layer)``, so the
timing collector, perf counters and resident memory all see each call's boundaries.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import tvm
from tvm import relax

from layerperf.backends.common import interleaved
from layerperf.backends.tvm.calls import WORK_BUILTINS, CallMap, CallSite, CallTensors
from layerperf.backends.tvm.memory import alloc_nbytes
from layerperf.backends.tvm.runtime import kept_affinity
from layerperf.backends.tvm.tensors import Seen, arg
from layerperf.collectors import Collector
from layerperf.collectors.timer import Timing
from layerperf.data.tensor import TensorInfo

LEVELS = (1, 2)
Hook = Callable[..., int]


def is_layer(site: CallSite, level: int) -> bool:
    """Whether a call site is a row at ``level``."""
    return level >= 2 or site.kernel or site.func in WORK_BUILTINS


def layer_sites(cmap: CallMap, level: int) -> tuple[list[CallSite], list[int]]:
    """(the call sites that are layers at ``level``, in order; for every call, its layer or -1)."""
    if level not in LEVELS:
        raise ValueError(f"level must be one of {LEVELS}, got {level}")
    sites: list[CallSite] = []
    layer_of: list[int] = []
    for site in cmap.sites:
        if is_layer(site, level):
            layer_of.append(len(sites))
            sites.append(site)
        else:
            layer_of.append(-1)
    return sites, layer_of


def make_hook(layer_of: Sequence[int], start: Callable[[int], None], stop: Callable[[int], None]) -> Hook:
    """A hook for one pass: ``start``/``stop`` around every call whose layer is not -1.

    Calls in ``main`` do not nest, so the layer started before a call is the one stopped after it.
    Kept to the fewest Python operations: its cost lands on every call's time (``hook_overhead``).
    """
    following = iter(layer_of).__next__
    current = -1

    def hook(func: Any, symbol: str, before: bool, ret: Any, *args: Any) -> int:
        nonlocal current
        if before:
            current = following()
            if current >= 0:
                start(current)
        elif current >= 0:
            stop(current)
        return 0

    return hook


def _info(name: str, value: Any) -> TensorInfo | None:
    shape = getattr(value, "shape", None)
    dtype = getattr(value, "dtype", None)
    if shape is None or dtype is None:
        return None
    return TensorInfo(name, tuple(int(d) for d in shape), str(dtype))


def split_args(site: CallSite, args: Sequence[Any], ret: Any) -> CallTensors:
    """A call's arguments as inputs and outputs: a kernel's first ``n_inputs`` are inputs."""
    infos = [_info(f"arg{i}", a) for i, a in enumerate(args)]
    n_in = site.n_inputs if site.kernel and site.n_inputs is not None else len(infos)
    outs = [_info("out", ret)] if not site.kernel else infos[n_in:]
    return CallTensors(tuple(t for t in infos[:n_in] if t is not None), tuple(t for t in outs if t is not None))


class Runner:
    """One VM and its inputs: plain runs, instrumented passes, and the passes that read tensors."""

    def __init__(self, executable: Any, device: Any, inputs: Sequence[np.ndarray], cmap: CallMap) -> None:
        with kept_affinity():  # the first parallel kernel starts TVM's pool, which pins this thread
            self.vm = relax.VirtualMachine(executable, device)
            self.inputs = [tvm.runtime.tensor(np.ascontiguousarray(a), device) for a in inputs]
            self.main = self.vm["main"]
            self.cmap = cmap
            self.plain()

    def plain(self) -> Any:
        """One run without the hook."""
        self.vm.set_instrument(None)
        return self.main(*self.inputs)

    def run_pass(self, collector: Collector, layer_of: Sequence[int]) -> Any:
        """One run with ``collector`` at every layer's boundaries (``layer_of``: from :func:`layer_sites`)."""
        self.vm.set_instrument(make_hook(layer_of, collector.start, collector.stop))
        collector.begin_pass()
        out = self.main(*self.inputs)
        collector.end_pass()
        self.vm.set_instrument(None)
        return out

    def watch(self, after: Callable[[int, Any, tuple[Any, ...]], None]) -> Any:
        """One run calling ``after(call, ret, args)`` after every call (untimed: it may be slow)."""
        position = [0]

        def hook(func: Any, symbol: str, before: bool, ret: Any, *args: Any) -> int:
            if before:
                return 0
            after(position[0], ret, args)
            position[0] += 1
            return 0

        self.vm.set_instrument(hook)
        try:
            return self.main(*self.inputs)
        finally:
            self.vm.set_instrument(None)

    def observe(self) -> tuple[list[Seen], Any]:
        """One run's tensor arguments and result of every call (untimed), and what ``main`` returned."""
        seen: list[Seen] = []
        returned = self.watch(lambda i, ret, args: seen.append(Seen(tuple(arg(a) for a in args), arg(ret))))
        return seen, returned

    def allocations(self) -> tuple[dict[int, int], list[tuple[int, int]]]:
        """One run's allocation sizes (call -> bytes) and every call's (start, end) on the
        perf_counter_ns clock, for :mod:`.memory`."""
        clock = time.perf_counter_ns
        sizes: dict[int, int] = {}
        spans: list[tuple[int, int]] = []
        started = [0]

        def hook(func: Any, symbol: str, before: bool, ret: Any, *args: Any) -> int:
            if before:
                started[0] = clock()
                return 0
            end = clock()
            nbytes = alloc_nbytes(symbol, args)
            if nbytes is not None:
                sizes[len(spans)] = nbytes
            spans.append((started[0], end))
            return 0

        self.vm.set_instrument(hook)
        try:
            self.main(*self.inputs)
        finally:
            self.vm.set_instrument(None)
        return sizes, spans

    def tensors(self) -> list[CallTensors]:
        """Each call's input and output shapes and dtypes, as one run really had them."""
        out: list[CallTensors] = []
        sites = self.cmap.sites
        self.watch(lambda i, ret, args: out.append(split_args(sites[i], args, ret)))
        return out

    def outputs(self, calls: set[int]) -> dict[int, list[np.ndarray]]:
        """Copies of what the given calls wrote (kernels: their output arguments), for checking."""
        out: dict[int, list[np.ndarray]] = {}
        sites = self.cmap.sites

        def keep(i: int, ret: Any, args: tuple[Any, ...]) -> None:
            if i in calls:
                n_in = sites[i].n_inputs or 0
                written = args[n_in:] if sites[i].kernel else (ret,)
                out[i] = [w.numpy() for w in written if hasattr(w, "numpy")]

        self.watch(keep)
        return out


@dataclass(frozen=True, slots=True)
class HookOverhead:
    """Plain runs and hooked runs (timing collector on), interleaved: medians and their ratio."""

    level: int
    runs: int
    plain_median_ns: float
    profiled_median_ns: float
    hooked_calls: int  # calls per run that start and stop a layer
    calls: int  # calls per run (the hook runs at every one)

    @property
    def ratio(self) -> float:
        return self.profiled_median_ns / self.plain_median_ns if self.plain_median_ns else float("nan")

    @property
    def per_call_ns(self) -> float:
        """The added time per VM call (two hook calls each)."""
        return (self.profiled_median_ns - self.plain_median_ns) / max(self.calls, 1)


def hook_overhead(runner: Runner, level: int, runs: int) -> HookOverhead:
    """Profiled (hook + timing collector at ``level``) vs plain runs, interleaved one by one."""
    _, layer_of = layer_sites(runner.cmap, level)
    timing = Timing()
    plain, profiled = interleaved(runner.plain, lambda: runner.run_pass(timing, layer_of), runs)
    return HookOverhead(level, runs, float(np.median(plain.wall_ns)), float(np.median(profiled.wall_ns)),
                        sum(1 for x in layer_of if x >= 0), len(layer_of))
