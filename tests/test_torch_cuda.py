"""The PyTorch backend's CUDA path, without a GPU: the refusal where torch sees none, and the pairing of
CUDA events and allocator readings at module boundaries and the kernels' modules, with fakes."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

torch = pytest.importorskip("torch")

import layerperf  # noqa: E402
from layerperf.backends.torch.cuda import CudaApi, CudaEvents  # noqa: E402
from layerperf.backends.torch.ranges import RUN_MARK  # noqa: E402
from layerperf.cli import main  # noqa: E402
from layerperf.errors import InputError  # noqa: E402

no_gpu = pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a GPU: nothing to refuse")


@no_gpu
def test_cuda_is_refused_in_one_line_without_a_gpu(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(InputError, match=r"torch\.cuda\.is_available\(\) is False"):
        layerperf.profile("resnet18", backend="torch", torch_device="cuda", image_size=32)  # type: ignore[arg-type]
    out = tmp_path / "out"
    assert main(["memory", "resnet18", "--backend", "torch", "--torch-device", "cuda", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "--torch-device cuda" in err and "Traceback" not in err and not out.exists()


def test_an_unknown_device_is_refused() -> None:
    with pytest.raises(InputError, match="must be cpu or cuda"):
        layerperf.profile("resnet18", backend="torch", torch_device="tpu", image_size=32)  # type: ignore[arg-type]


class FakeDevice:
    """A device clock the test moves, and a caching allocator's counters (allocated, peak since reset)."""

    def __init__(self) -> None:
        self.t_ms = 0.0
        self.allocated = 0
        self.peak = 0
        self.syncs = 0

    def alloc(self, nbytes: int) -> None:
        self.allocated += nbytes
        self.peak = max(self.peak, self.allocated)

    def reset_peak(self) -> None:
        self.peak = self.allocated

    def api(self) -> CudaApi:
        dev = self

        class Event:
            t_ms: float | None = None

            def record(self) -> None:
                self.t_ms = dev.t_ms

            def elapsed_time(self, end: Any) -> float:
                assert dev.syncs, "elapsed_time before the device was synchronized"
                return float(end.t_ms - self.t_ms)

        def sync() -> None:
            dev.syncs += 1

        return CudaApi(event=Event, synchronize=sync, allocated=lambda: dev.allocated,
                       max_allocated=lambda: dev.peak, reset_peak=self.reset_peak)


def _pass(dev: FakeDevice, col: CudaEvents) -> None:
    """block (layer 0) holds conv (layer 1): conv allocates 40 bytes of scratch and frees them, keeps 10;
    block then keeps 5 more. Device time: block 1 ms before conv, conv 2 ms, block 0.5 ms after."""
    col.begin_pass()
    dev.t_ms += 0.25
    col.start(0)
    dev.t_ms += 1.0
    col.start(1)
    dev.alloc(40)
    dev.alloc(10)
    dev.alloc(-40)
    dev.t_ms += 2.0
    col.stop(1)
    dev.alloc(5)
    dev.t_ms += 0.5
    col.stop(0)
    dev.t_ms += 0.25
    col.end_pass()


def test_device_time_per_module_from_event_pairs_one_sync_a_pass() -> None:
    dev = FakeDevice()
    dev.alloc(1000)  # the weights, before any pass
    col = CudaEvents(dev.api(), clock=iter(range(0, 10**9, 10**6)).__next__)
    _pass(dev, col)
    _pass(dev, col)
    runs = col.runs()
    assert dev.syncs == 2  # once at the end of each pass, for all its pairs
    assert [r.dur_ns for r in runs] == [3_750_000, 3_750_000]  # each to its last boundary (block's end)
    block, conv = runs[1].spans
    assert (block.layer, block.dur_ns, conv.layer, conv.dur_ns) == (0, 3_500_000, 1, 2_000_000)
    assert conv.start_ns - block.start_ns == 1_000_000 and block.start_ns == runs[1].start_ns + 250_000


def test_allocator_peak_per_nested_module() -> None:
    dev = FakeDevice()
    dev.alloc(1000)
    col = CudaEvents(dev.api())
    _pass(dev, col)
    block, conv = col.memory(2)
    assert conv == {"cuda_allocated_delta_bytes": 10, "cuda_peak_allocated_bytes": 1050, "cuda_peak_rise_bytes": 50}
    # the block's peak is its child's, though the child's boundaries reset the allocator's peak
    assert block == {"cuda_allocated_delta_bytes": 15, "cuda_peak_allocated_bytes": 1050,
                     "cuda_peak_rise_bytes": 50}


def _cpu(id_: int, name: str, parent: Any = None) -> Any:
    return SimpleNamespace(id=id_, name=name, cpu_parent=parent, device_type=torch.autograd.DeviceType.CPU,
                           linked_correlation_id=0)


def _kernel(name: str, launcher: int, start_us: float, dur_us: float) -> Any:
    return SimpleNamespace(id=0, name=name, cpu_parent=None, device_type=torch.autograd.DeviceType.CUDA,
                           linked_correlation_id=launcher, thread=7,
                           time_range=SimpleNamespace(start=start_us, end=start_us + dur_us))


def test_kernels_go_under_the_module_whose_op_launched_them() -> None:
    """Level 2 on a GPU: a kernel goes under the module of the op row it descends from (the op called
    with no aten op running, whose module the stamps gave), named ``module/kernel``."""
    from layerperf.backends.torch.op_rows import kernel_ops

    run = _cpu(1, RUN_MARK)
    conv_op = _cpu(4, "aten::conv2d", run)
    inner_op = _cpu(5, "aten::cudnn_convolution", conv_op)
    add_op = _cpu(6, "aten::add", run)
    root_op = _cpu(7, "aten::flatten", run)
    events = [run, conv_op, inner_op, add_op, root_op,
              _kernel("implicit_gemm", 5, 100.0, 30.0), _kernel("elementwise_add", 6, 140.0, 2.0),
              _kernel("copy", 7, 150.0, 1.0), _kernel("orphan", 99, 160.0, 1.0),
              _kernel("implicit_gemm", 5, 170.0, 3.0)]
    module_of = {id(conv_op): "block.conv", id(add_op): "block", id(root_op): None}
    got = kernel_ops(events, module_of, 10.0)
    assert [(k.key, k.parent, k.domain, k.start_ns, k.dur_ns, k.tid) for k in got] == [
        ("block.conv/implicit_gemm", "block.conv", "cuda", 110_000, 30_000, 7),
        ("block/elementwise_add", "block", "cuda", 150_000, 2_000, 7), ("copy", None, "cuda", 160_000, 1_000, 7),
        ("orphan", None, "cuda", 170_000, 1_000, 7), ("block.conv/implicit_gemm#1", "block.conv", "cuda", 180_000,
                                                      3_000, 7)]


def test_the_driver_takes_its_times_and_memory_from_the_device_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """The whole --torch-device cuda path through the driver, on the CPU: torch.cuda's calls faked (events
    stamped by the host clock, the allocator's counters by the test), the model left where it is."""
    import time

    from layerperf.backends.torch import cuda as on_gpu

    dev = FakeDevice()
    api = dev.api()

    def stamp() -> Any:
        ev = api.event()
        real_record = ev.record

        def record() -> None:
            dev.t_ms = time.perf_counter() * 1e3
            dev.alloc(64)  # something allocated between any two boundaries
            real_record()

        ev.record = record
        return ev

    fake = CudaApi(event=stamp, synchronize=api.synchronize, allocated=api.allocated,
                   max_allocated=api.max_allocated, reset_peak=api.reset_peak)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda: None)
    monkeypatch.setattr(on_gpu, "to_device", lambda model, device: model)
    monkeypatch.setattr(on_gpu.CudaApi, "real", classmethod(lambda cls: fake))

    class Net(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.block = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU())

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.block(x)

    prof = layerperf.profile((Net().eval(), torch.randn(2, 8)), backend="torch", torch_device="cuda",
                             runs=2, warmup=0)  # type: ignore[arg-type]
    assert prof.metadata.provider == "cuda" and {layer.provider for layer in prof.layers} == {"cuda"}
    # once before the runs, after each of the 2 plain (latency) calls, at the end of each of the 2 timed
    # passes (to read its events), and at the end of the untimed pass that reads the allocator's counters
    assert dev.syncs == 1 + 2 + 2 + 1
    assert len(prof.runs) == 2 and all(len(r.spans) == 4 for r in prof.runs)  # the model's own row, its 3 modules
    block, linear = (prof.layers.index(next(la for la in prof.layers if la.name == n)) for n in ("block", "block.0"))
    spans = {s.layer: s for s in prof.runs[1].spans}
    assert spans[block].start_ns <= spans[linear].start_ns and spans[linear].dur_ns < spans[block].dur_ns
    for layer in prof.layers:
        assert set(layer.memory_figures) == set(on_gpu.MEMORY_KEYS) and layer.memory_figures["cuda_peak_rise_bytes"] > 0


def test_events_are_pooled_across_passes() -> None:
    """A boundary records an event from the pool: after the first pass, no event is created."""
    dev = FakeDevice()
    made = 0
    api = dev.api()

    def event() -> Any:
        nonlocal made
        made += 1
        return api.event()

    col = CudaEvents(CudaApi(event=event, synchronize=api.synchronize, allocated=api.allocated,
                             max_allocated=api.max_allocated, reset_peak=api.reset_peak), allocator=False)
    _pass(dev, col)
    first = made
    for _ in range(3):
        _pass(dev, col)
    assert first == 5 and made == first  # the pass's start, 2 per module call (the last ends the pass)
    assert [r.dur_ns for r in col.runs()] == [3_750_000] * 4 and col.memory(2) == [{}, {}]


def test_in_code_device_runs_end_at_their_last_row_and_read_the_allocator_only_when_recorded_for_memory(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """layerperf.torch with profile_device="cuda" (torch.cuda faked, events stamped by the host clock): a
    with block's run ends at its last row, not at the next model call (20 ms later here); with memory=True
    the allocator's counters are read in the run recorded for memory only, never in a timed one."""
    import time

    import layerperf.torch as lt
    from layerperf.backends.torch import cuda as on_gpu

    dev = FakeDevice()
    api = dev.api()
    reads = {"allocated": 0}
    timed = {"on": False}

    def stamp() -> Any:
        ev = api.event()
        real_record = ev.record

        def record() -> None:
            dev.t_ms = time.perf_counter() * 1e3
            real_record()

        ev.record = record
        return ev

    def allocated() -> int:
        reads["allocated"] += timed["on"]
        return dev.allocated

    fake = CudaApi(event=stamp, synchronize=api.synchronize, allocated=allocated,
                   max_allocated=api.max_allocated, reset_peak=api.reset_peak)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda: None)  # torch.profiler's, with the CUDA activity
    monkeypatch.setattr(on_gpu.CudaApi, "real", classmethod(lambda cls: fake))
    net = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU()).eval()
    x = torch.randn(2, 8)
    for memory in (False, True):
        options: dict[str, Any] = {"memory": True, "sample_rate": 0} if memory else {}
        with lt.Profiler(profile_device="cuda", **options) as p, torch.inference_mode():
            for k in range(3):
                timed["on"] = not memory or k > 0
                net(x)
                time.sleep(0.25)  # the time between steps, in no run
        prof = p.profile
        assert len(prof.runs) == (2 if memory else 3)
        # a run ends at its last boundary: the pause after it is not in it (a run of a Linear(8, 8) under
        # a busy host has read 85 ms, so the pause is long enough that no slow-down can be taken for it)
        assert all(r.dur_ns < 250_000_000 for r in prof.runs), [r.dur_ns for r in prof.runs]
        assert reads["allocated"] == 0
        keys = {k for layer in prof.layers for k in layer.memory_figures}
        assert keys == (set(on_gpu.MEMORY_KEYS) if memory else set())
