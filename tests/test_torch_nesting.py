"""PyTorch code as users write it: profilers nested in or overlapping one another (same thread, other
threads, a decorator inside a with block, start()/stop() across another), and torch.compile'd modules
(in code and on ``--backend torch``). Each profiler gets exactly its own runs: the untimed re-run one
makes for its shapes and FLOPs when it stops is no run of another's; compiled code runs eagerly, its
original modules timed, nothing compiled."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import layerperf
from layerperf.cli import main

torch = pytest.importorskip("torch")
lt = pytest.importorskip("layerperf.torch")
nn = torch.nn


class Net(nn.Module):  # type: ignore[misc]
    def __init__(self) -> None:
        super().__init__()
        self.a, self.b = nn.Linear(64, 64), nn.Linear(64, 64)

    def forward(self, x: Any) -> Any:
        return self.b(torch.relu(self.a(x)))


@pytest.fixture
def net() -> Net:
    torch.manual_seed(0)
    return Net().eval()


X = torch.randn(8, 64)


def _calls(fn: Callable[[], object], n: int) -> list[int]:
    """``n`` calls of ``fn``, each timed around it (ns): the window its run must lie in."""
    windows = []
    for _ in range(n):
        t0 = time.perf_counter_ns()
        fn()
        windows.append(time.perf_counter_ns() - t0)
    return windows


def _own_runs(p: layerperf.Profile, windows: list[int]) -> None:
    """``p`` has one run per call it saw, each inside that call (so no run is another's pass, and no layer's
    median exceeds the longest call), and the rows of the model."""
    assert len(p.runs) == len(windows)
    assert all(run.dur_ns <= window for run, window in zip(p.runs, windows, strict=True))
    assert [layer.name for layer in p.layers] == ["Net", "a", "b"]
    assert all(row["calls"] == len(windows) for row in p.table())
    assert all(float(np.median(p.inclusive_ns(i))) <= max(windows) for i in range(len(p.layers)))


@pytest.mark.parametrize("inner_level", [1, 2])
def test_nested_with_blocks_each_get_their_own_runs(net: Net, inner_level: int) -> None:
    with torch.inference_mode(), lt.Profiler() as outer:
        with lt.Profiler(level=inner_level) as inner:  # its stop re-runs the model, untimed, inside outer
            windows = _calls(lambda: net(X), 3)
        later = _calls(lambda: net(X), 1)
    _own_runs(outer.profile, windows + later)  # before the fix: 5 runs, the re-run timed as one
    assert len(inner.profile.runs) == 3


def test_inner_warmup_leaves_the_outer_runs_alone(net: Net) -> None:
    with torch.inference_mode(), lt.Profiler() as outer, lt.Profiler(warmup=1) as inner:
        windows = _calls(lambda: net(X), 3)
    _own_runs(outer.profile, windows)
    _own_runs(inner.profile, windows[1:])


def test_decorator_inside_a_with_block(net: Net) -> None:
    @lt.profile()
    def infer(x: Any) -> Any:
        with torch.inference_mode():
            return net(x)

    with lt.Profiler() as outer:
        windows = _calls(lambda: infer(X), 3)
        decorated = infer.profiler.stop()  # type: ignore[attr-defined]  # its re-run, inside the with block
    _own_runs(outer.profile, windows)
    _own_runs(decorated, windows)


def test_start_stop_overlapping_another(net: Net) -> None:
    with torch.inference_mode():
        first = lt.Profiler().start()
        before = _calls(lambda: net(X), 1)
        second = lt.Profiler().start()
        both = _calls(lambda: net(X), 1)
        one = first.stop()  # while second runs
        after = _calls(lambda: net(X), 2)
        two = second.stop()
    _own_runs(one, before + both)
    _own_runs(two, both + after)


def test_profilers_on_other_threads(net: Net) -> None:
    got: dict[str, Any] = {}

    def elsewhere() -> None:
        with torch.inference_mode(), lt.Profiler() as p:
            got["windows"] = _calls(lambda: net(X), 3)
        got["profile"] = p.profile

    with torch.inference_mode(), lt.Profiler() as here:
        mine = _calls(lambda: net(X), 1)
        t = threading.Thread(target=elsewhere)
        t.start()
        t.join()
        mine += _calls(lambda: net(X), 1)
    _own_runs(here.profile, mine)
    _own_runs(got["profile"], got["windows"])


def test_a_backend_profile_inside_a_with_block_is_none_of_its_runs(net: Net) -> None:
    with lt.Profiler() as outer:
        layerperf.profile((net, X), backend="torch", runs=2, warmup=1)  # type: ignore[arg-type]
        with torch.inference_mode():
            windows = _calls(lambda: net(X), 1)
    _own_runs(outer.profile, windows)


# -- torch.compile ---------------------------------------------------------------------------------------
class _Counting:
    """A torch.compile backend that counts what dynamo hands it (a compiled graph each)."""

    def __init__(self) -> None:
        self.graphs = 0

    def __call__(self, gm: Any, example_inputs: Any) -> Any:
        self.graphs += 1
        return gm.forward


def test_compiled_module_in_code_is_profiled_eagerly_through_its_original(net: Net) -> None:
    backend = _Counting()
    compiled = torch.compile(net, backend=backend)
    with torch.inference_mode(), lt.Profiler() as p:
        windows = _calls(lambda: compiled(X), 3)
    _own_runs(p.profile, windows)  # the original's rows, named as the original's: no _orig_mod
    assert backend.graphs == 0  # nothing compiled, no recompile forced by the hooks
    assert any("torch.compile'd" in w and "_orig_mod" in w and "eager" in w for w in p.profile.warnings)
    assert p.profile.layers[1].flops == 2 * 8 * 64 * 64 + 8 * 64


def test_compiled_submodule_keeps_its_path(net: Net) -> None:
    backend = _Counting()
    net.a = torch.compile(net.a, backend=backend)

    @lt.profile()
    def infer() -> Any:
        with torch.inference_mode():
            return net(X)

    windows = _calls(infer, 2)
    p = infer.profiler.stop()  # type: ignore[attr-defined]
    _own_runs(p, windows)
    assert backend.graphs == 0 and any("run eagerly: a" in w for w in p.warnings)


COMPILED = '''
import torch

def compiled():
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU()).eval()
    return torch.compile(net, backend="eager"), torch.randn(8, 64)
'''


def test_compiled_factory_on_the_backend(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from torch._dynamo.utils import counters

    path = tmp_path / "nets.py"
    path.write_text(COMPILED)
    frames = counters["frames"]["total"]
    prof = layerperf.profile(f"{path}:compiled", backend="torch", runs=2, warmup=1)
    assert counters["frames"]["total"] == frames  # no frame compiled
    assert [layer.name for layer in prof.layers] == ["Sequential", "0", "1"]
    assert prof.layers[1].flops == 2 * 8 * 64 * 64 + 8 * 64
    assert any("torch.compile'd" in w for w in prof.warnings)
    capsys.readouterr()
    assert main(["profile", f"{path}:compiled", "--runs", "2", "--warmup", "0"]) == 0
    out = capsys.readouterr()
    assert "torch.compile'd" in out.out and "_orig_mod" not in out.out.replace("(._orig_mod)", "")
    assert "global hooks" not in out.err  # torch's own warning on layerperf's hooks: not shown
