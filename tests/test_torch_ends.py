"""How a PyTorch profile ends when things are not as planned, and what it holds: a profile of no timed
run (every run warm-up) is a valid, labelled empty one that ``analyze`` and ``report`` read; a failure in
any run (forward, loss, backward, optimizer step; first or later) is one line naming the model and the
run (exit 2 from the CLI), the user's own exception from the API, and nothing partial written; the
model's own code (its root module's forward outside its children) is a row; a perf event this machine
cannot count is an InputError everywhere."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pytest

import layerperf
from layerperf.cli import main
from layerperf.errors import BackendError, CounterError, InputError

torch = pytest.importorskip("torch")
lt = pytest.importorskip("layerperf.torch")
nn = torch.nn


class Own(nn.Module):  # type: ignore[misc]
    """Work of its own around its child: a matmul before it and a sum after."""

    def __init__(self) -> None:
        super().__init__()
        self.w = nn.Parameter(torch.randn(32, 32))
        self.fc = nn.Linear(32, 8)

    def forward(self, x: Any) -> Any:
        return self.fc(x @ self.w).sum(-1)


X = torch.randn(4, 32)
OWN_FLOPS = 2 * 4 * 32 * 32 + 4 * 8  # x @ w, then the sum: 1 per input element


# -- a profile of no timed run ---------------------------------------------------------------------------
def test_all_warmup_is_a_labelled_empty_profile(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    model = Own().eval()
    with pytest.warns(UserWarning, match=r"warm-up \(warmup=5\)"), torch.inference_mode(), \
            lt.Profiler(warmup=5) as prof:
        for _ in range(3):
            model(X)
    p = prof.profile
    assert p.runs == [] and p.layers == [] and p.warnings[0].startswith("no timed run: all 3 run(s) were warm-up")
    layerperf.save(p, tmp_path / "empty")
    again = layerperf.load(tmp_path / "empty")
    assert again.runs == [] and again.warnings == p.warnings
    capsys.readouterr()
    assert main(["analyze", str(tmp_path / "empty")]) == 0
    assert "empty profile: no timed run: all 3 run(s) were warm-up (warmup=5)" in capsys.readouterr().out
    assert main(["analyze", str(tmp_path / "empty" / "trace.json"), "--format", "json"]) == 0
    assert orjson.loads(capsys.readouterr().out) == []
    assert main(["report", str(tmp_path / "empty"), "-o", str(tmp_path / "empty.html")]) == 0
    assert "warm-up (warmup=5)" in (tmp_path / "empty.html").read_text()


def _counters_usable() -> bool:
    from layerperf.collectors import Collectors

    try:
        Collectors.make(events=["task-clock"])
    except InputError:
        return False
    return True


COUNTING = pytest.mark.skipif(not _counters_usable(), reason="perf counters not permitted here")


@pytest.mark.parametrize("options", [{"memory": True}, {"level": 2},
                                     pytest.param({"events": ["task-clock"]}, marks=COUNTING)])
def test_empty_profile_with_any_option(tmp_path: Path, options: dict[str, Any]) -> None:
    model = Own().eval()
    for calls in (0, 2):  # no call at all, or warm-up calls only
        with pytest.warns(UserWarning, match="no timed run"), torch.inference_mode(), \
                lt.Profiler(warmup=2, path=tmp_path / f"{calls}", **options) as prof:
            for _ in range(calls):
                model(X)
        assert prof.profile.runs == [] and (tmp_path / f"{calls}" / "trace.json").is_file()


def test_decorator_of_warmup_calls_only_saves_an_empty_profile(tmp_path: Path) -> None:
    @lt.profile(warmup=2, path=tmp_path / "out")
    def infer() -> Any:
        with torch.inference_mode():
            return Own().eval()(X)

    infer()
    with pytest.warns(UserWarning, match="warmup=2"):
        p = infer.profiler.stop()  # type: ignore[attr-defined]
    assert p.runs == [] and (tmp_path / "out" / "trace.json").is_file()
    assert main(["analyze", str(tmp_path / "out")]) == 0


# -- failures ---------------------------------------------------------------------------------------------
class Flaky(nn.Module):  # type: ignore[misc]
    """Its forward raises on call ``at``."""

    def __init__(self, at: int) -> None:
        super().__init__()
        self.fc, self.calls, self.at = nn.Linear(32, 8), 0, at

    def forward(self, x: Any) -> Any:
        self.calls += 1
        if self.calls == self.at:
            raise ValueError(f"bad batch at call {self.at}")
        return self.fc(x)


class _BadBackward(torch.autograd.Function):
    @staticmethod
    def forward(ctx: object, x: Any) -> Any:
        return x.clone()

    @staticmethod
    def backward(ctx: object, grad: Any) -> Any:
        raise ValueError("bad gradient")


class _BadLoss(nn.Module):  # type: ignore[misc]
    def forward(self, out: Any) -> Any:
        raise ValueError("bad loss")


class _BadSGD(torch.optim.SGD):  # type: ignore[misc]
    def step(self, closure: Any = None) -> Any:
        raise ValueError("bad step")


def _train(part: str) -> None:
    """One training step that fails in ``part``."""
    model = Flaky(0)
    opt = (_BadSGD if part == "step" else torch.optim.SGD)(model.parameters(), lr=0.1)
    out = model(X)
    loss = _BadLoss()(out) if part == "loss" else out.sum()
    if part == "backward":
        loss = _BadBackward.apply(loss)
    loss.backward()
    opt.step()


@pytest.mark.parametrize("at", [1, 3])
def test_with_block_failure_reraises_and_writes_nothing(tmp_path: Path, at: int) -> None:
    model = Flaky(at).eval()
    prof = lt.Profiler(path=tmp_path / "out", warmup=1)
    with pytest.raises(ValueError, match=f"bad batch at call {at}"), torch.inference_mode(), prof:
        for _ in range(4):
            model(X)
    assert not (tmp_path / "out").exists()
    with pytest.raises(BackendError, match=f"^Flaky: run {at}{' [(]warm-up[)]' if at == 1 else ''} raised "
                                           f"ValueError: bad batch at call {at}; the profile was not saved$"):
        prof.stop()
    with pytest.raises(BackendError):
        _ = prof.profile


@pytest.mark.parametrize("part", ["loss", "backward", "step"])
def test_training_step_failure_reraises_and_writes_nothing(tmp_path: Path, part: str) -> None:
    prof = lt.Profiler(path=tmp_path / "out")
    with pytest.raises(ValueError, match=f"bad {'gradient' if part == 'backward' else part}"), prof:
        _train(part)
    assert not (tmp_path / "out").exists()
    with pytest.raises(BackendError, match="^Flaky: run 1 raised ValueError"):
        prof.stop()


def test_decorated_call_failing_as_the_process_ends_writes_nothing(tmp_path: Path) -> None:
    script = tmp_path / "step.py"
    script.write_text(f'''
import sys, torch
sys.path.insert(0, {str(Path(__file__).parent)!r})
import layerperf.torch as lt
from test_torch_ends import Flaky, X

model = Flaky(3)

@lt.profile(path={str(tmp_path / "out")!r})
def step():
    model(X).sum().backward()

for _ in range(5):
    step()
''')
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300,
                          env={**__import__("os").environ, "PYTHONPATH": ":".join(sys.path)})
    assert done.returncode == 1 and "ValueError: bad batch at call 3" in done.stderr  # the user's own, unchanged
    assert done.stderr.rstrip().splitlines()[-1] == ("layerperf.torch: step: call 3 (model Flaky) raised ValueError: "
                                                     "bad batch at call 3; the profile was not saved")
    assert not (tmp_path / "out").exists()


FLAKY = '''
import torch

class Flaky(torch.nn.Module):
    def __init__(self, at):
        super().__init__()
        self.fc, self.calls, self.at = torch.nn.Linear(8, 8), 0, at

    def forward(self, x):
        self.calls += 1
        if self.calls == self.at:
            raise ValueError(f"bad batch at call {self.at}")
        return self.fc(x)
''' + "".join(f"\ndef at{k}():\n    return Flaky({k}).eval(), torch.randn(2, 8)\n" for k in (1, 3, 4, 5, 6, 8))


@pytest.mark.parametrize(("at", "where", "extra"), [
    (1, "call 1 of the model (the recorded pass)", []),
    (3, "call 3 of the model (warm-up run 2)", []),
    (5, "call 5 of the model (profiled run 1)", []),  # 4: the plain run before it
    (6, "call 6 of the model (plain run 2)", []),
    (4, "call 4 of the model (level-2 run recording shapes 1)", ["--level", "2"]),
    (8, "call 8 of the model (level-2 profiled run 2)", ["--level", "2"]),  # 5, 7: plain runs
])
def test_cli_failure_in_any_run_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str], at: int, where: str,
                                            extra: list[str]) -> None:
    path = tmp_path / "flaky.py"
    path.write_text(FLAKY)
    out = tmp_path / "out"
    code = main(["profile", f"{path}:at{at}", "--runs", "3", "--warmup", "2", "--out", str(out), *extra])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "Traceback" not in err, err
    assert f"flaky:at{at}: {where}: forward failed on inputs [2x8]: ValueError: bad batch at call {at}" in err, err
    assert not out.exists()


# -- the model's own code is a row -----------------------------------------------------------------------
def _own_row_holds_the_rest(p: layerperf.Profile) -> None:
    """The root's row encloses every other row: per run, the rows' self times add up to its inclusive time."""
    assert p.layers[0].name == "Own" and p.layers[0].parent is None
    assert [layer.parent for layer in p.layers[1:]] == ["Own"]
    total = sum(p.durations_ns(i) for i in range(len(p.layers)))
    assert np.all(total == p.inclusive_ns(0)) and np.all(p.durations_ns(0) > 0)


def test_root_row_on_the_backend() -> None:
    prof = layerperf.profile((Own().eval(), X), backend="torch", runs=3, warmup=1)  # type: ignore[arg-type]
    _own_row_holds_the_rest(prof)
    assert prof.layers[0].flops == OWN_FLOPS and prof.layers[0].inputs[0].shape == (4, 32)
    assert prof.graph is not None and prof.graph.outputs == ("fc",)  # as before the root's row: its last child's


def test_root_row_in_code_inference_and_training() -> None:
    model = Own()
    with lt.Profiler() as prof:
        for _ in range(2):
            model(X).sum().backward()
    p = prof.profile
    assert [layer.name for layer in p.layers] == ["Own", "fc", "Own (backward)", "fc (backward)"]
    assert p.layers[0].flops == OWN_FLOPS and p.layers[2].flops is not None and p.layers[2].flops > 0
    model.eval()
    with torch.inference_mode(), lt.Profiler() as prof:
        model(X)
        model(X)
    _own_row_holds_the_rest(prof.profile)


def test_level_2_has_the_root_code_as_op_rows() -> None:
    backend = layerperf.profile((Own().eval(), X), backend="torch", level=2, runs=2, warmup=0)  # type: ignore[arg-type]
    with torch.inference_mode(), lt.Profiler(level=2) as prof:
        Own().eval()(X)
    for p in (backend, prof.profile):
        names = [layer.name for layer in p.layers]
        assert "Own" not in names and "fc" in names
        top = [layer for layer in p.layers if layer.parent is None and layer.domain == "aten"]
        assert [layer.op_type for layer in top] == ["aten::matmul", "aten::sum"]  # the model's own ops
        assert sum(layer.flops or 0 for layer in top) == OWN_FLOPS


def test_onnx_graph_form_has_no_root_row() -> None:
    from layerperf.backends.torch.record import root_name

    assert root_name(Own(), {"fc"}) == "Own" and root_name(Own(), {"Own"}) == "Own (model)"


# -- perf events ------------------------------------------------------------------------------------------
def test_counter_errors_are_input_errors(capsys: pytest.CaptureFixture[str]) -> None:
    assert issubclass(CounterError, InputError)
    with pytest.raises(InputError, match="no-such-event"):
        lt.Profiler(events=["no-such-event"])
    try:
        lt.Profiler(events=["cycles"])
    except InputError as exc:  # this machine counts no hardware events (a VM): the same error on the CLI
        assert main(["profile", "resnet18", "--backend", "torch", "--events", "cycles", "--runs", "1"]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and exc.message in err
