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
    assert [layer.name for layer in p.layers] == ["body", "body.0", "body.1", "head"]
    assert [layer.parent for layer in p.layers] == [None, "body", "body", None]
    assert len(p.runs) == 3  # 4 calls less 1 warm-up
    assert all(row["calls"] == 3 for row in p.table())
    lin = p.layers[1]
    assert lin.flops == 2 * 4 * 32 * 64 and lin.inputs[0].shape == (4, 32) and lin.outputs[0].shape == (4, 64)
    assert p.layers[2].flops is None  # relu: no formula, unknown
    body = 0
    assert np.all(p.durations_ns(body) == p.inclusive_ns(body) - p.inclusive_ns(1) - p.inclusive_ns(2))


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


def test_training_model_keeps_timings_without_costs(net: Net) -> None:
    net.train()
    with lt.Profiler() as prof:
        net(torch.randn(2, 32)).sum().backward()
    p = prof.profile
    assert len(p.runs) == 1 and all(layer.flops is None for layer in p.layers)
    assert any("training mode" in w for w in p.warnings)


def test_profile_before_stop_is_refused(net: Net) -> None:
    prof = lt.Profiler()
    with pytest.raises(InputError, match="not ended"):
        _ = prof.profile
    with pytest.raises(InputError, match="level 1"):
        lt.Profiler(level=2)
