"""The memory profile on PyTorch: torch's allocation events per module, checked against tensors of
known size and against torch.profiler's own flat list of memory events; the CLI's table and SVGs."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import orjson
import pytest

torch = pytest.importorskip("torch")

import layerperf  # noqa: E402
from layerperf.cli import main  # noqa: E402
from layerperf.data.memory_report import OUTSIDE_NAME  # noqa: E402

TEMP, KEEP, BIG = 3 << 20, 1 << 20, 5 << 20  # bytes: distinct, so a wrong attribution shows


class Temp(torch.nn.Module):
    """Allocates ``n`` bytes and frees them before it returns."""

    def __init__(self, n: int) -> None:
        super().__init__()
        self.n = n

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        t = torch.empty(self.n, dtype=torch.uint8)
        del t
        return x


class Keep(torch.nn.Module):
    """Allocates ``n`` bytes and returns them."""

    def __init__(self, n: int) -> None:
        super().__init__()
        self.n = n

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.empty(self.n, dtype=torch.uint8)


class Outer(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.inner = Temp(BIG)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.inner(x)


class Known(torch.nn.Module):
    """temp: TEMP bytes come and go; keep: KEEP bytes stay (the output); outer.inner: BIG bytes come and
    go while KEEP is held, the peak (KEEP + BIG)."""

    def __init__(self) -> None:
        super().__init__()
        self.temp, self.keep, self.outer = Temp(TEMP), Keep(KEEP), Outer()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.temp(x)
        kept = self.keep(x)
        self.outer(x)
        return kept


def _profile(model: torch.nn.Module, x: torch.Tensor) -> layerperf.Profile:
    return layerperf.profile((model.eval(), x), backend="torch", memory=True, runs=1, warmup=1,
                             sample_rate=0)


def test_known_tensors_show_in_their_modules() -> None:
    prof = _profile(Known(), torch.zeros(4))
    assert prof.memory is not None
    allocs = prof.memory.allocations
    assert allocs is not None and allocs.device == "cpu"
    by_name = {m.name: m for m in allocs.modules}
    temp, keep, outer, inner = by_name["temp"], by_name["keep"], by_name["outer"], by_name["outer.inner"]
    assert (temp.self_allocated_bytes, temp.self_freed_bytes, temp.peak_rise_bytes) == (TEMP, TEMP, TEMP)
    assert (keep.self_allocated_bytes, keep.self_freed_bytes) == (KEEP, 0)
    assert (inner.self_allocated_bytes, inner.self_freed_bytes) == (BIG, BIG)
    assert (outer.self_allocated_bytes, outer.allocated_bytes, outer.freed_bytes) == (0, BIG, BIG)
    assert inner.peak_live_bytes == outer.peak_live_bytes == KEEP + BIG and inner.peak_rise_bytes == BIG
    assert allocs.peak_live_bytes == KEEP + BIG and allocs.peak_module == "outer.inner"
    assert allocs.retained_bytes == KEEP  # the output, held by the caller to the pass's end
    assert allocs.allocated_bytes == TEMP + KEEP + BIG and allocs.outside.self_allocated_bytes == 0
    assert prof.memory.max_allocated_bytes == KEEP + BIG and prof.memory.max_allocated_source == "allocator peak"


def _flat_memory_events(model: torch.nn.Module, x: tuple[torch.Tensor, ...]) -> list[int]:
    """Signed bytes of every CPU memory event of one call, from torch.profiler's flat event list (not
    the event tree layerperf reads), in time order."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as p, torch.inference_mode():
        out = model(*x)
    del out
    assert p.profiler is not None and p.profiler.kineto_results is not None
    events = [e for e in p.profiler.kineto_results.events()
              if e.name() == "[memory]" and str(e.device_type()) == "DeviceType.CPU"]
    return [int(e.nbytes()) for e in sorted(events, key=lambda e: e.start_ns())]


def test_resnet_peak_and_totals_match_torch_profilers_own_list() -> None:
    from layerperf.backends.base import RunPlan
    from layerperf.backends.torch.models import load

    torch.set_num_threads(1)
    model = load("resnet18", RunPlan(zoo_options={"image_size": 32}))
    prof = layerperf.profile("resnet18", backend="torch", memory=True, runs=1, warmup=1, image_size=32,
                             threads=1, sample_rate=0)
    assert prof.memory is not None and prof.memory.allocations is not None
    allocs = prof.memory.allocations
    deltas = _flat_memory_events(model.module, model.args)
    assert allocs.events == len(deltas) > 50
    assert allocs.allocated_bytes == sum(d for d in deltas if d > 0)
    assert allocs.peak_live_bytes == int(np.max(np.cumsum(deltas)))
    # every event is one module's own (or the model's code outside them), exactly once
    own = sum(m.self_allocated_bytes for m in allocs.modules) + allocs.outside.self_allocated_bytes
    assert own == allocs.allocated_bytes
    # the module at the peak is the one running the event that reached it
    at = allocs.live_bytes.index(allocs.peak_live_bytes)
    assert prof.layers[allocs.layer[at]].name == allocs.peak_module
    peak = allocs.module(allocs.peak_layer)
    assert peak is not None and peak.peak_live_bytes == allocs.peak_live_bytes


def test_memory_cli_prints_modules_and_draws_the_allocator_timeline(tmp_path: Path,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "mem"
    assert main(["memory", "resnet18", "--backend", "torch", "--image-size", "32", "--threads", "1",
                 "--runs", "1", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "modules by bytes allocated in their own code" in text and OUTSIDE_NAME in text
    assert "allocator (cpu" in text and "max allocated" in text and "of 0 runs" not in text
    saved = layerperf.load(out / "trace.json")
    assert saved.memory is not None and saved.memory.allocations is not None
    allocs = saved.memory.allocations
    svg = (out / "memory_timeline.svg").read_text()
    assert "allocator events" in svg and f"in {allocs.peak_module} (" in svg
    assert (out / "memory_flow.svg").exists()
    assert main(["memory", "resnet18", "--backend", "torch", "--image-size", "32", "--threads", "1",
                 "--runs", "1", "--out", str(tmp_path / "j"), "--format", "json"]) == 0
    doc = orjson.loads(capsys.readouterr().out)
    assert doc["allocations"]["peak_module"] and len(doc["allocations"]["modules"]) == len(allocs.modules) + 1


class Between(torch.nn.Module):
    """Its own code makes a tensor between two children: no layer produces it and it is no input."""

    def __init__(self) -> None:
        super().__init__()
        self.a, self.b, self.c = torch.nn.ReLU(), torch.nn.ReLU(), torch.nn.ReLU()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.a(x)
        z = self.b(y)
        return self.c(z * 2)  # z * 2: made by this code, used by c only


def test_a_tensor_made_between_layers_lives_from_its_first_use() -> None:
    from layerperf.analysis.memory.report import analyze_memory

    prof = layerperf.profile((Between().eval(), torch.zeros(1024)), backend="torch", runs=1, warmup=0)
    rep = analyze_memory(prof)
    names = [n.name for n in rep.nodes]
    made = [b for b in rep.blocks if b.kind == "code"]
    assert len(made) == 1 and made[0].first == made[0].last == names.index("c") and made[0].nbytes == 4096
    # Between: the model's own row (its root module), which outputs what c does, as a container its last child's
    assert rep.peak_entries()[0]["producer"] in {"a", "b", "c", "(code before c)", "(graph input)", "Between"}
    assert rep.nodes[names.index("a")].live_bytes == 2 * 4096  # x and a's output; not z * 2, made later


def test_allocation_report_for_a_profile_made_elsewhere() -> None:
    """What the in-code Profiler calls: its own layers and module index, one more call, no graph section."""
    from dataclasses import replace

    from layerperf.backends.torch.memory import allocation_report

    model = Known().eval()
    x = torch.zeros(4)
    prof = replace(layerperf.profile((model, x), backend="torch", runs=1, warmup=0), graph=None, memory=None)
    names = {layer.name: i for i, layer in enumerate(prof.layers)}
    index = {id(m): names[p] for p, m in model.named_modules() if p in names}

    def call() -> torch.Tensor:
        with torch.inference_mode():
            return model(x)

    rep = allocation_report(call, index, prof)
    assert rep.allocations is not None and rep.allocations.peak_module == "outer.inner"
    assert rep.allocations.peak_live_bytes == KEEP + BIG and any("no graph section" in w for w in rep.warnings)
