"""layerperf.torch in code: the Profiler as a with block and start()/stop(), the decorator, warm-up, saving."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import layerperf  # noqa: E402
import layerperf.torch as lt  # noqa: E402
from layerperf.errors import InputError  # noqa: E402


class Net(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.body = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU())
        self.head = torch.nn.Linear(64, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.body(x))


@pytest.fixture
def net() -> Net:
    torch.manual_seed(0)
    return Net().eval()


def test_with_block(net: Net) -> None:
    x = torch.randn(4, 32)
    with lt.Profiler(warmup=1) as prof:
        for _ in range(4):
            net(x)
    p = prof.profile
    # the model's own code first (its root module's row), its modules under it
    assert [layer.name for layer in p.layers] == ["Net", "body", "body.0", "body.1", "head"]
    assert [layer.parent for layer in p.layers] == [None, "Net", "body", "body", "Net"]
    assert len(p.runs) == 3  # 4 calls less 1 warm-up
    assert all(row["calls"] == 3 for row in p.table())
    lin = p.layers[2]
    # the matmul and the bias add (1 an output element, as the cost model's Gemm)
    assert lin.flops == 2 * 4 * 32 * 64 + 4 * 64 and lin.inputs[0].shape == (4, 32) and lin.outputs[0].shape == (4, 64)
    assert p.layers[3].flops == 4 * 64  # relu: 1 an element, as the cost model's Relu
    body = 1
    assert np.all(p.durations_ns(body) == p.inclusive_ns(body) - p.inclusive_ns(2) - p.inclusive_ns(3))


def test_start_stop_and_save(net: Net, tmp_path: Path) -> None:
    prof = lt.Profiler(path=tmp_path / "out", formats=["layers.csv"]).start()
    net(torch.randn(2, 32))
    p = prof.stop()
    assert sorted(f.name for f in (tmp_path / "out").iterdir()) == ["layers.csv"]
    assert (tmp_path / "out" / "layers.csv").read_text().count("\n") == len(p.layers) + 1
    with pytest.raises(InputError):
        lt.Profiler(formats=["report.pdf"])


def test_decorator_aggregates_calls(net: Net, tmp_path: Path) -> None:
    @lt.profile(path=tmp_path / "dec")
    def infer(x: torch.Tensor) -> torch.Tensor:
        with torch.inference_mode():
            return net(x)

    for _ in range(3):
        infer(torch.randn(2, 32))
    p = infer.profiler.stop()  # type: ignore[attr-defined]
    assert len(p.runs) == 3 and p.layers[-1].name == "head"
    again = layerperf.load(tmp_path / "dec")
    assert [layer.name for layer in again.layers] == [layer.name for layer in p.layers]


def test_training_model_costs_from_a_forward_and_backward_rerun(net: Net) -> None:
    net.train()
    with lt.Profiler() as prof:
        net(torch.randn(2, 32)).sum().backward()
    p = prof.profile
    flops = {layer.name: layer.flops for layer in p.layers}
    assert len(p.runs) == 1 and flops["body.0"] == 2 * 2 * 32 * 64 + 2 * 64
    # its weight's gradient (a matmul) and its bias's (a sum over the batch, 1 an element); the input needs none
    assert flops["body.0 (backward)"] == 2 * 2 * 32 * 64 + 2 * 64
    assert flops["body.1 (backward)"] == 2 * 64  # threshold_backward: 1 an element
    assert not any("threshold_backward" in w or "sum" in w for w in p.warnings), p.warnings


def test_profile_before_stop_is_refused(net: Net) -> None:
    prof = lt.Profiler()
    with pytest.raises(InputError, match="not ended"):
        _ = prof.profile
    with pytest.raises(InputError, match="never started"):
        prof.stop()


@pytest.mark.parametrize(("options", "message"), [
    ({"level": 3}, "level must be 1"),
    ({"level": True}, "level must be 1"),
    ({"warmup": -1}, "warmup must be"),
    ({"sample_rate": 2}, "memory profile only"),
    ({"memory": True, "sample_rate": -1}, "sample-rate"),
    ({"level": 2, "memory": True}, "level 1"),
    ({"level": 2, "events": ["task-clock"]}, "level 1"),
    ({"events": "task-clock,,page-faults"}, "an empty event name"),  # a string as --events reads it
    ({"profile_device": "tpu"}, "'cpu' or 'cuda'"),
    ({"formats": ["report.pdf"]}, "unknown format"),
    ({"formats": ["memory_flow.svg"]}, "needs the memory profile"),
    ({"formats": []}, "nothing would be saved"),
])
def test_options_refused_up_front(options: dict[str, object], message: str) -> None:
    with pytest.raises(InputError, match=message) as err:
        lt.Profiler(**options)  # type: ignore[arg-type]
    assert "\n" not in str(err.value)
    with pytest.raises(InputError, match=message):
        lt.profile(**options)  # type: ignore[arg-type]


def test_cuda_only_where_available() -> None:
    if torch.cuda.is_available():
        assert lt.Profiler(profile_device="cuda").settings.device == "cuda"
    else:
        with pytest.raises(InputError, match="cuda is not available"):
            lt.Profiler(profile_device="cuda")


def test_path_that_cannot_be_a_directory_is_refused_before_running(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    with pytest.raises(InputError, match="is a file"):
        lt.Profiler(path=tmp_path / "file" / "out")


def _counters_usable() -> bool:
    from layerperf.collectors import Collectors
    from layerperf.errors import LayerperfError

    try:
        Collectors.make(events=["task-clock"])
    except LayerperfError:
        return False
    return True


@pytest.mark.skipif(not _counters_usable(), reason="perf counters not permitted here")
def test_counters_per_module_on_the_runs_that_happen(net: Net) -> None:
    x = torch.randn(2048, 32)  # each Linear's work well above an empty boundary's own task-clock
    with lt.Profiler(events=["task-clock", "page-faults"], warmup=1) as prof:
        for _ in range(4):
            net(x)
    p = prof.profile
    assert p.counters is not None and p.counters.passes == 3 and p.counters.multiplex
    assert p.counters.fraction_counted is not None
    assert all(0 < f <= 1 for f in p.counters.fraction_counted["task-clock"])
    for layer in p.layers:
        assert len(layer.counters["task-clock"]) == 3
        assert all(v >= 0 for v in layer.counters["page-faults"])
    body, lin, relu = p.layers[1], p.layers[2], p.layers[3]  # under the model's own row (0)
    # self counts, as the times: the Sequential's own is what its two children's leave of its whole
    assert p.counters.inclusive is not None
    inclusive = p.counters.inclusive["task-clock"]
    clock = [np.asarray(layer.counters["task-clock"]) for layer in (body, lin, relu)]
    assert inclusive[1] >= np.median(clock[1]) > 0
    # per pass the whole is the three self counts and what the children's two boundaries counted,
    # which each child's count had taken off as an empty boundary's (the calibration)
    boundaries = 2 * p.counters.calibration["task-clock"]
    assert inclusive[1] == pytest.approx(float(np.median(clock[0] + clock[1] + clock[2])) + boundaries, rel=0.02)


def test_memory_profile_and_its_pictures(net: Net, tmp_path: Path) -> None:
    x = torch.randn(8, 32)
    with lt.Profiler(memory=True, sample_rate=2, path=tmp_path / "mem") as prof:
        for _ in range(3):  # the first records the allocator's events, untimed; two timed runs
            net(x)
    p = prof.profile
    assert p.memory is not None and p.memory.runtime is not None
    stops_per_run = len(p.layers)  # every module once a run
    assert len(p.memory.runtime.rss_samples) == 2 * ((stops_per_run + 1) // 2)
    assert p.memory.runtime.rss_hwm_bytes >= p.memory.runtime.rss_baseline_bytes > 0
    assert sorted(f.name for f in (tmp_path / "mem").iterdir()) == [
        "layers.csv", "memory_flow.svg", "memory_timeline.svg", "trace.json"]
    assert (tmp_path / "mem" / "memory_flow.svg").read_text().startswith("<svg")


def test_level2_in_a_with_block(net: Net) -> None:
    x = torch.randn(4, 32)
    with lt.Profiler(level=2) as prof:
        for _ in range(2):
            net(x)
    p = prof.profile
    by_name = {layer.name: layer for layer in p.layers}
    assert by_name["body.0/aten::linear"].parent == "body.0" and by_name["body.0"].flops is None
    assert len(p.runs) == 2 and all(row["calls"] == 2 for row in p.table())


def test_memory_in_eval_mode_has_the_allocators_figures_per_module(net: Net) -> None:
    x = torch.randn(16, 32)
    with lt.Profiler(memory=True) as prof:
        for _ in range(2):
            net(x)
    m = prof.profile.memory
    assert m is not None and m.allocations is not None and m.max_allocated_source == "allocator peak"
    by_name = {mod.name: mod for mod in m.allocations.modules}
    assert by_name["body.0"].self_allocated_bytes == 16 * 64 * 4  # its output, float32
    assert by_name["head"].self_allocated_bytes == 16 * 8 * 4


def test_memory_of_a_training_step_has_the_allocators_figures_per_row(net: Net) -> None:
    """The run recorded for memory is a real training step: its forward rows allocate their outputs
    (kept for the backward), the backward rows the gradients, the optimizer step its own work; that run
    is not among the timed ones."""
    net.train()
    opt = torch.optim.SGD(net.parameters(), lr=0.1, momentum=0.9)
    x = torch.randn(16, 32)

    @lt.profile(memory=True, warmup=1)
    def step() -> None:
        loss = net(x).sum()
        opt.zero_grad()
        loss.backward()
        opt.step()

    for _ in range(4):
        step()
    p = step.profiler.stop()
    assert len(p.runs) == 2  # 4 calls: 1 warm-up, 1 recorded for memory, 2 timed
    m = p.memory
    assert m is not None and m.allocations is not None and not any("no allocator" in w for w in m.warnings)
    by_name = {mod.name: mod for mod in m.allocations.modules}
    assert by_name["body.0"].self_allocated_bytes >= 16 * 64 * 4  # its output
    w = net.body[0].weight
    # the backward of body.0 makes its weight's and bias's gradients (16 x 64 output, 32 inputs)
    assert by_name["body.0 (backward)"].self_allocated_bytes >= (w.numel() + 64) * 4
    assert by_name["optimizer.step (SGD)"].calls == 1 and m.allocations.peak_module
    net.eval()


def test_memory_needs_a_run_besides_the_recorded_one(net: Net) -> None:
    with pytest.raises(InputError, match="first run after warm-up"), lt.Profiler(memory=True):
        net(torch.randn(4, 32))


class Keywords(torch.nn.Module):
    """A model called with keyword arguments only, one of its submodules too (as Hugging Face models)."""

    class Embed(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.table = torch.nn.Embedding(50, 16)

        def forward(self, input_ids: torch.Tensor | None = None, scale: torch.Tensor | None = None) -> torch.Tensor:
            assert input_ids is not None and scale is not None
            return self.table(input_ids) * scale

    def __init__(self) -> None:
        super().__init__()
        self.embeddings = Keywords.Embed()
        self.proj = torch.nn.Linear(16, 8)

    def forward(self, input_ids: torch.Tensor | None = None, mask: torch.Tensor | None = None) -> torch.Tensor:
        if input_ids is None or mask is None:
            raise ValueError("You must specify input_ids and mask")
        return self.proj(self.embeddings(input_ids=input_ids, scale=mask))


def test_keyword_arguments_are_replayed_for_shapes_and_flops() -> None:
    model = Keywords().eval()
    ids, mask = torch.randint(0, 50, (2, 7)), torch.ones(2, 7, 1)
    with lt.Profiler() as prof:
        model(input_ids=ids, mask=mask)
    p = prof.profile
    assert not any("re-running the model failed" in w for w in p.warnings), p.warnings
    by_name = {layer.name: layer for layer in p.layers}
    assert by_name["proj"].flops == 2 * 2 * 7 * 16 * 8 + 2 * 7 * 8 and by_name["proj"].in_shapes == "2x7x16"
    assert by_name["embeddings"].in_shapes == "2x7;2x7x1"  # its keyword arguments are its inputs
    assert p.graph is not None and p.graph.inputs == ("input_ids", "mask")


def test_a_failing_block_keeps_its_own_exception(net: Net) -> None:
    """The model raised on its only call, the one memory=True records: the user sees the model's error,
    not the profile's complaint that no timed run followed."""
    with pytest.raises(RuntimeError, match="mat1 and mat2"), lt.Profiler(memory=True):
        net(torch.randn(4, 5))


def test_memory_under_the_users_own_profiler_leaves_its_trace_alone(net: Net) -> None:
    """A torch.profiler session already running: layerperf starts none of its own (that would end the
    user's), says there are no allocator figures, and the user's trace keeps every op."""
    from torch.profiler import profile

    x = torch.randn(4, 32)
    with profile() as outer, lt.Profiler(memory=True) as prof:
        for _ in range(2):
            net(x)
    ops = [e.name for e in outer.events() if e.name == "aten::linear"]
    assert len(ops) >= 2 * 2  # two Linears, two calls (and the untimed re-run for shapes at the end)
    m = prof.profile.memory
    assert m is not None and m.allocations is None and any("already running" in w for w in m.warnings)
    assert len(prof.profile.runs) == 2  # no run was taken for memory
    with pytest.raises(InputError, match="already running"), profile(), lt.Profiler(level=2):
        pass
