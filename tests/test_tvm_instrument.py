"""Every Relax VM call timed through the instrument hook: which calls are layers at levels 1 and 2,
the collectors' boundaries in order, shapes per call, costs, and the hook's overhead measured."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

pytest.importorskip("tvm")
os.environ.setdefault("TVM_NUM_THREADS", "1")

import numpy as np  # noqa: E402
import onnx  # noqa: E402

from layerperf.backends.tvm.build import Build, build  # noqa: E402
from layerperf.backends.tvm.instrument import Runner, hook_overhead, layer_sites, make_hook  # noqa: E402
from layerperf.backends.tvm.kernel_cost import site_costs  # noqa: E402
from layerperf.collectors import Collectors  # noqa: E402
from layerperf.collectors.boundary import Boundaries  # noqa: E402
from layerperf.collectors.timer import Timing  # noqa: E402
from layerperf.cost.onnx.graph import graph_costs  # noqa: E402
from tvm_models import feed  # noqa: E402

from conftest import tiny_cnn  # noqa: E402


class Recorder:
    """A collector that keeps every boundary call, in order."""

    def __init__(self) -> None:
        self.marks: list[tuple[str, int]] = []

    def begin_pass(self) -> None:
        self.marks.append(("begin", -1))

    def start(self, layer: int) -> None:
        self.marks.append(("start", layer))

    def stop(self, layer: int) -> None:
        self.marks.append(("stop", layer))

    def end_pass(self) -> None:
        self.marks.append(("end", -1))


@pytest.fixture(scope="module")
def model() -> onnx.ModelProto:
    return tiny_cnn()


@pytest.fixture(scope="module")
def built(model: onnx.ModelProto) -> Build:
    return build(model, use_cache=False)


@pytest.fixture(scope="module")
def runner(model: onnx.ModelProto, built: Build) -> Runner:
    inputs = feed(model)
    return Runner(built.executable, built.device, [inputs["input"]], built.cmap)


def test_levels_pick_the_calls_that_are_layers(built: Build) -> None:
    sites1, layer_of1 = layer_sites(built.cmap, 1)
    sites2, layer_of2 = layer_sites(built.cmap, 2)
    assert [s.func for s in sites1] == [s.func for s in built.cmap.sites
                                        if s.kernel or s.func == "vm.builtin.reshape"]
    assert len(sites2) == len(built.cmap.sites) == len(layer_of1) == len(layer_of2)
    assert layer_of2 == list(range(len(sites2)))
    assert [i for i in layer_of1 if i >= 0] == list(range(len(sites1)))
    with pytest.raises(ValueError):
        layer_sites(built.cmap, 3)


@pytest.mark.parametrize("level", [1, 2])
def test_each_layer_is_started_and_stopped_once_per_pass(runner: Runner, level: int) -> None:
    sites, layer_of = layer_sites(runner.cmap, level)
    rec = Recorder()
    for _ in range(2):
        runner.run_pass(rec, layer_of)
    one = [("begin", -1)] + [m for i in range(len(sites)) for m in (("start", i), ("stop", i))] + [("end", -1)]
    assert rec.marks == one * 2


def test_the_timing_collector_gives_a_span_per_layer_per_run(runner: Runner) -> None:
    sites, layer_of = layer_sites(runner.cmap, 1)
    timing = Timing()
    for _ in range(3):
        runner.run_pass(timing, layer_of)
    runs = timing.runs()
    assert len(runs) == 3
    for run in runs:
        assert [s.layer for s in run.spans] == list(range(len(sites)))
        assert all(s.dur_ns >= 0 for s in run.spans)
        assert sum(s.dur_ns for s in run.spans) <= run.dur_ns


def test_several_collectors_nest_at_each_call(runner: Runner) -> None:
    _, layer_of = layer_sites(runner.cmap, 1)
    outer, inner = Recorder(), Recorder()
    runner.run_pass(Boundaries([outer, inner]), layer_of)
    assert outer.marks == inner.marks and len(outer.marks) > 2


def test_the_collector_driver_runs_its_passes_through_the_hook(runner: Runner) -> None:
    sites, layer_of = layer_sites(runner.cmap, 1)
    request = Collectors.make(memory=True)
    driver = request.driver(len(sites)).run(lambda c: runner.run_pass(c, layer_of))
    assert driver.memory is not None and driver.memory.rss_samples


def test_shapes_and_dtypes_per_call(runner: Runner, model: onnx.ModelProto) -> None:
    tensors = runner.tensors()
    assert len(tensors) == len(runner.cmap.sites)
    conv = next(i for i, s in enumerate(runner.cmap.sites) if s.func.startswith(("conv2d", "fused_conv2d")))
    ins = [t.shape for t in tensors[conv].inputs]
    assert ins[0] == (1, 3, 16, 16) and (8, 3, 3, 3) in ins
    assert [t.shape for t in tensors[conv].outputs] == [(1, 8, 16, 16)]
    assert all(t.dtype == "float32" for t in tensors[conv].inputs)
    alloc = next(i for i, s in enumerate(runner.cmap.sites) if s.func == "vm.builtin.alloc_tensor")
    assert tensors[alloc].outputs and tensors[alloc].outputs[0].dtype == "float32"


def test_kernel_costs_add_up_to_the_models(runner: Runner, model: onnx.ModelProto) -> None:
    node_costs = [c for _, c in graph_costs(model)]
    costs = site_costs(runner.cmap, node_costs, runner.tensors())
    assert sum(c.flops or 0 for c in costs) == sum(c.flops or 0 for c in node_costs)
    conv = next(i for i, s in enumerate(runner.cmap.sites) if s.func.startswith(("conv2d", "fused_conv2d")))
    assert costs[conv].bytes_read == (3 * 16 * 16 + 8 * 3 * 3 * 3 + 8) * 4  # input, weight, bias (1x8x1x1)
    assert costs[conv].bytes_written == 8 * 16 * 16 * 4
    flatten = next(i for i, s in enumerate(runner.cmap.sites) if s.func == "vm.builtin.reshape")
    assert [model.graph.node[n].op_type for n in runner.cmap.sites[flatten].nodes] == ["Flatten"]


def test_the_hook_calls_collectors_in_order_without_a_vm() -> None:
    rec = Recorder()
    hook = make_hook([-1, 0, -1, 1], rec.start, rec.stop)
    for _ in range(4):
        hook(None, "f", True, None)
        hook(None, "f", False, None)
    assert rec.marks == [("start", 0), ("stop", 0), ("start", 1), ("stop", 1)]


def test_plain_and_profiled_runs_give_the_same_result(runner: Runner) -> None:
    plain = runner.plain().numpy()
    _, layer_of = layer_sites(runner.cmap, 2)
    profiled = runner.run_pass(Timing(), layer_of).numpy()
    np.testing.assert_array_equal(plain, profiled)


@pytest.mark.parametrize("level", [1, 2])
def test_hook_overhead_is_measured_interleaved(runner: Runner, level: int) -> None:
    got = hook_overhead(runner, level, runs=5)
    assert got.runs == 5 and got.calls == len(runner.cmap.sites)
    assert got.hooked_calls == len(layer_sites(runner.cmap, level)[0])
    assert got.plain_median_ns > 0 and got.profiled_median_ns > 0 and got.ratio > 0


def test_threads_are_set_before_the_pool_starts_and_nothing_is_pinned() -> None:
    code = ("import os; from layerperf.backends.tvm.runtime import set_threads; a = os.sched_getaffinity(0); "
            "n = set_threads(2); print(n, os.sched_getaffinity(0) == a, set_threads(1))")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    env.pop("TVM_NUM_THREADS", None)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert out.stdout.split() == ["2", "True", "2"], out.stderr  # a running pool keeps its count
