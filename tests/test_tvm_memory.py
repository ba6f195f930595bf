"""The Relax VM's memory at level 2: blocks and tensors allocated and freed per call, the two peaks,
the call at the peak, and the allocator record layerperf's memory report reads."""

from __future__ import annotations

import os

import pytest

pytest.importorskip("tvm")
os.environ.setdefault("TVM_NUM_THREADS", "1")

import onnx  # noqa: E402

from layerperf.analysis.memory.allocations import ModuleSpan  # noqa: E402
from layerperf.backends.tvm import memory  # noqa: E402
from layerperf.backends.tvm.build import Build, build  # noqa: E402
from layerperf.backends.tvm.instrument import Runner, layer_sites  # noqa: E402
from layerperf.models import zoo  # noqa: E402
from tvm_models import feed  # noqa: E402


@pytest.fixture(scope="module")
def model() -> onnx.ModelProto:
    return zoo.build("resnet18", image_size=32)


@pytest.fixture(scope="module")
def runs(model: onnx.ModelProto) -> dict[str, tuple[Build, Runner]]:
    out = {}
    for pipeline in ("default", "unfused"):
        b = build(model, pipeline=pipeline, use_cache=False)
        out[pipeline] = b, Runner(b.executable, b.device, [feed(model)["input"]], b.cmap)
    return out


def test_one_run_allocates_and_frees_all_but_its_output(runs: dict) -> None:
    b, runner = runs["default"]
    sizes, _ = runner.allocations()
    evs, retained = memory.events(b.main, sizes)
    assert retained == 1000 * 4  # the logits' block
    for kind in ("storage", "tensor"):
        net = sum(e.nbytes for e in evs if e.kind == kind)
        assert net == retained, kind
    mem = memory.summarize(evs, retained)
    assert 0 < mem.peak_used_bytes <= mem.peak_allocated_bytes <= mem.allocated_bytes
    assert mem.tensors >= len(b.cmap.kernels()) - 1 and mem.blocks < mem.tensors  # the plan reuses blocks
    assert b.cmap.sites[mem.peak_call].func == "vm.builtin.alloc_tensor"


def test_allocation_sizes_match_what_the_kernels_write(runs: dict) -> None:
    b, runner = runs["default"]
    sizes, _ = runner.allocations()
    tensors = runner.tensors()
    for site in b.cmap.sites:
        if site.func == "vm.builtin.alloc_tensor":
            assert sizes[site.call] == tensors[site.call].outputs[0].nbytes


def test_fusion_allocates_less(runs: dict) -> None:
    got = {}
    for pipeline, (b, runner) in runs.items():
        sizes, _ = runner.allocations()
        got[pipeline] = memory.summarize(*memory.events(b.main, sizes))
    assert got["default"].allocated_bytes < got["unfused"].allocated_bytes
    assert got["default"].tensors < got["unfused"].tensors


def test_the_allocator_record_for_the_memory_report(runs: dict) -> None:
    b, runner = runs["default"]
    sizes, call_ns = runner.allocations()
    evs, retained = memory.events(b.main, sizes)
    sites, _ = layer_sites(b.cmap, 2)
    spans = [ModuleSpan(i, start, end) for i, (start, end) in enumerate(call_ns)]
    rec = memory.allocations(evs, call_ns, spans, [s.func for s in sites])
    mem = memory.summarize(evs, retained)
    assert rec.allocated_bytes == mem.allocated_bytes and rec.peak_live_bytes == mem.peak_allocated_bytes
    assert rec.retained_bytes == retained and rec.peak_module == "vm.builtin.alloc_storage"
    storage_rows = [m for m in rec.modules if m.name == "vm.builtin.alloc_storage"]  # a row per call site
    assert sum(m.self_allocated_bytes for m in storage_rows) == mem.allocated_bytes


def test_blocks_allocated_for_each_kernel(runs: dict) -> None:
    b, runner = runs["default"]
    sizes, _ = runner.allocations()
    mem = memory.summarize(*memory.events(b.main, sizes))
    per_kernel: dict[int, int] = {}
    for call, nbytes in mem.per_call.items():
        kernel = b.cmap.sites[call].serves
        assert kernel is not None and b.cmap.sites[kernel].kernel
        per_kernel[kernel] = per_kernel.get(kernel, 0) + nbytes
    assert sum(per_kernel.values()) == mem.allocated_bytes
