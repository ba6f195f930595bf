"""The PyTorch backend on a real NVIDIA GPU: device time from CUDA events, the caching allocator's figures
per module, kernels under their modules at level 2, the allocator's events with --memory, and
``layerperf.torch`` with ``profile_device="cuda"`` on an inference and a training step. Every test here
needs ``torch.cuda.is_available()``; on a machine without a GPU they skip (tests/test_torch_cuda.py
covers the same code there with fakes)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs an NVIDIA GPU (torch.cuda)")

import layerperf  # noqa: E402
import layerperf.torch as lt  # noqa: E402
from layerperf.cli import main  # noqa: E402

BATCH, SIZE = 8, 64


@pytest.fixture(scope="module")
def level1() -> Any:
    return layerperf.profile("resnet18", backend="torch", torch_device="cuda", runs=8, warmup=3, batch=BATCH,
                             image_size=SIZE)


def _layer(prof: Any, name: str) -> tuple[int, Any]:
    return next((i, la) for i, la in enumerate(prof.layers) if la.name == name)


def test_device_time_per_module_nests_within_the_run(level1: Any) -> None:
    prof = level1
    assert prof.metadata.provider == "cuda" and {la.provider for la in prof.layers} == {"cuda"}
    assert len(prof.runs) == 8
    top = [i for i, la in enumerate(prof.layers) if la.parent is None]
    for run in prof.runs:
        by_layer = {s.layer: s for s in run.spans}
        assert all(s.dur_ns > 0 for s in run.spans)
        # top-level modules follow one another on the stream: their device times add up to at most the run's
        assert sum(by_layer[i].dur_ns for i in top if i in by_layer) <= run.dur_ns
        for s in run.spans:  # every span lies inside its run
            assert run.start_ns <= s.start_ns and s.start_ns + s.dur_ns <= run.start_ns + run.dur_ns
    # a child's span lies inside its parent's
    i_block, _ = _layer(prof, "layer1.0")
    i_conv, _ = _layer(prof, "layer1.0.conv1")
    for run in prof.runs:
        by_layer = {s.layer: s for s in run.spans}
        b, c = by_layer[i_block], by_layer[i_conv]
        assert b.start_ns <= c.start_ns and c.start_ns + c.dur_ns <= b.start_ns + b.dur_ns


def test_device_run_time_is_within_the_synchronized_host_latency(level1: Any) -> None:
    """The events around a pass time the device's part of it; the host's profiled time of the same pass
    (up to its synchronization) holds it."""
    prof = level1
    device = np.array([r.dur_ns for r in prof.runs])
    host = np.array(prof.profiled_latency_ns)
    assert len(host) == len(device) and np.median(device) <= np.median(host) * 1.05


def test_allocator_figures_per_module(level1: Any) -> None:
    """conv1's output (BATCHx64x32x32 fp32) stays allocated after it (bn1 reads it): its allocated delta
    is the output's bytes (a multiple of the caching allocator's 512-byte rounding), its peak at least that."""
    _, conv1 = _layer(level1, "conv1")
    out_bytes = BATCH * 64 * (SIZE // 2) ** 2 * 4
    assert conv1.memory_figures["cuda_allocated_delta_bytes"] == out_bytes
    assert conv1.memory_figures["cuda_peak_rise_bytes"] >= out_bytes
    _, model = _layer(level1, "layer1")
    peak = "cuda_peak_allocated_bytes"
    assert model.memory_figures[peak] >= conv1.memory_figures[peak] - out_bytes


def test_level2_puts_each_kernel_under_its_module() -> None:
    prof = layerperf.profile("resnet18", backend="torch", torch_device="cuda", runs=3, warmup=2, batch=BATCH,
                             image_size=SIZE, level=2)
    kernels = [la for la in prof.layers if la.domain == "cuda"]
    assert kernels, "no kernel rows"
    assert not [la.name for la in prof.layers if "layerperf::" in la.name]  # the ranges' GPU copies are no kernels
    ops = {(la.op_type, la.parent) for la in prof.layers if la.domain == "aten"}
    assert ("aten::conv2d", "conv1") in ops and ("aten::linear", "fc") in ops
    convs = [la.name for la in prof.layers if la.op_type == "Conv2d"]
    parents = {la.parent for la in kernels}
    # every conv module launched a kernel of its own
    missing = [c for c in convs if c not in parents]
    assert not missing, missing
    # a kernel's device time is positive, and on its own stream's lane
    idx = {la.name: i for i, la in enumerate(prof.layers)}
    for run in prof.runs:
        durs = [s.dur_ns for s in run.spans if prof.layers[s.layer].domain == "cuda"]
        assert durs and min(durs) >= 0 and sum(durs) > 0
    assert any(prof.layers[idx[k.name]].parent == "fc" for k in kernels)


def test_memory_records_the_gpu_allocators_events(tmp_path: Path) -> None:
    out = tmp_path / "mem"
    assert main(["memory", "resnet18", "--backend", "torch", "--torch-device", "cuda", "--batch", str(BATCH),
                 "--image-size", str(SIZE), "--out", str(out), "--runs", "2", "--warmup", "1"]) == 0
    prof = layerperf.load(out / "trace.json")
    alloc = prof.memory.allocations
    assert alloc is not None and alloc.device.startswith("cuda")
    assert alloc.peak_live_bytes > 0 and alloc.peak_module
    i_conv1 = next(i for i, la in enumerate(prof.layers) if la.name == "conv1")
    conv1 = alloc.module(i_conv1)
    assert conv1 is not None and conv1.self_allocated_bytes >= BATCH * 64 * (SIZE // 2) ** 2 * 4


class Net(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 16, 3, padding=1)
        self.relu = torch.nn.ReLU()
        self.fc = torch.nn.Linear(16, 10)

    def forward(self, x: Any) -> Any:
        return self.fc(self.relu(self.conv(x)).mean((2, 3)))


def test_in_code_train_step_on_the_gpu() -> None:
    """profile_device="cuda": rows timed by CUDA events, forward, backward (run on autograd's device
    thread) and the optimizer step, with the allocator's figures on the forward rows."""
    model = Net().cuda().train()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    loss_fn = torch.nn.CrossEntropyLoss()
    x, y = torch.randn(BATCH, 3, SIZE, SIZE, device="cuda"), torch.randint(0, 10, (BATCH,), device="cuda")

    @lt.profile(warmup=1, profile_device="cuda")
    def step() -> None:
        loss = loss_fn(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()

    for _ in range(4):
        step()
    prof = step.profiler.stop()
    names = [la.name for la in prof.layers]
    for want in ("conv", "conv (backward)", "fc (backward)", "optimizer.step (SGD)", "CrossEntropyLoss"):
        assert want in names, names
    assert len(prof.runs) == 3 and all(la.provider == "cuda" for la in prof.layers)
    for run in prof.runs:
        got = {prof.layers[s.layer].name: s.dur_ns for s in run.spans}
        assert got["conv"] > 0 and got["conv (backward)"] > 0 and got["optimizer.step (SGD)"] > 0
    _, conv = _layer(prof, "conv")
    assert "cuda_allocated_delta_bytes" not in conv.memory_figures  # read only with memory=True (they cost)


def test_in_code_level2_on_the_gpu() -> None:
    model = Net().cuda().eval()
    x = torch.randn(BATCH, 3, SIZE, SIZE, device="cuda")
    with lt.Profiler(level=2, warmup=1, profile_device="cuda") as p, torch.inference_mode():
        for _ in range(3):
            model(x)
    prof = p.profile
    kernels = [la for la in prof.layers if la.domain == "cuda"]
    assert {la.parent for la in kernels} >= {"conv", "fc"}


def test_in_code_train_step_allocator_figures_with_memory() -> None:
    """memory=True: the allocator's counters read at each row's boundaries; conv's output is kept for the
    backward, so its forward row's allocated delta holds at least it."""
    model = Net().cuda().train()
    x = torch.randn(BATCH, 3, SIZE, SIZE, device="cuda")
    with lt.Profiler(memory=True, profile_device="cuda") as p:
        for _ in range(2):
            model(x).sum().backward()
    _, conv = _layer(p.profile, "conv")
    assert conv.memory_figures["cuda_allocated_delta_bytes"] >= BATCH * 16 * SIZE * SIZE * 4
    assert conv.memory_figures["cuda_peak_rise_bytes"] >= conv.memory_figures["cuda_allocated_delta_bytes"]
