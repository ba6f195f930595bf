"""layerperf.torch on training steps: a row per module call's backward, the optimizer step and the loss
as rows, runs as calls of the decorated function (or outermost model calls in a with block)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import layerperf  # noqa: E402
import layerperf.torch as lt  # noqa: E402
from layerperf.cli import main  # noqa: E402

nn = torch.nn


class TwoConv(nn.Module):
    """2 convs (the first fed by the data, which needs no grad), an in-place ReLU, a Linear."""

    def __init__(self) -> None:
        super().__init__()
        self.features = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(inplace=True),
                                      nn.Conv2d(8, 8, 3, padding=1), nn.ReLU(inplace=True))
        self.fc = nn.Linear(8, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(self.features(x).mean((2, 3)))


# the model's own code (its root module, TwoConv: the mean) is a row, its modules under it, forward and backward
FORWARD = ["TwoConv", "features", "features.0", "features.1", "features.2", "features.3", "fc", "CrossEntropyLoss"]
BACKWARD = ["CrossEntropyLoss (backward)", "TwoConv (backward)", "fc (backward)", "features (backward)",
            "features.3 (backward)", "features.2 (backward)", "features.1 (backward)", "features.0 (backward)"]


def _setup(seed: int = 0) -> tuple[TwoConv, nn.Module, torch.optim.Optimizer, torch.Tensor, torch.Tensor]:
    torch.manual_seed(seed)
    net = TwoConv()
    x, y = torch.randn(2, 3, 8, 8), torch.tensor([0, 3])
    return net, nn.CrossEntropyLoss(), torch.optim.SGD(net.parameters(), lr=0.1, momentum=0.9), x, y


def _spans(p: layerperf.Profile, run: int) -> dict[str, tuple[int, int]]:
    """name -> (start, end) of the first call of each row in one run."""
    out: dict[str, tuple[int, int]] = {}
    for s in p.runs[run].spans:
        out.setdefault(p.layers[s.layer].name, (s.start_ns, s.start_ns + s.dur_ns))
    return out


def test_train_step_rows(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    net, loss_fn, opt, x, y = _setup()

    @lt.profile(warmup=1, path=tmp_path / "train")
    def step() -> float:
        loss = loss_fn(net(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.item()

    for _ in range(4):
        step()
    p = step.profiler.stop()  # type: ignore[attr-defined]
    assert [layer.name for layer in p.layers] == [*FORWARD, *BACKWARD, "optimizer.step (SGD)"]
    assert len(p.runs) == 3  # 4 calls less 1 warm-up
    assert all(row["calls"] == 3 for row in p.table())
    parents = {layer.name: layer.parent for layer in p.layers}
    assert parents["features.0"] == "features" and parents["CrossEntropyLoss"] is None
    assert parents["features.0 (backward)"] == "features (backward)"
    assert parents["fc (backward)"] == "TwoConv (backward)"
    assert parents["optimizer.step (SGD)"] is None
    step_row = p.layers[-1]
    assert (step_row.op_type, step_row.domain) == ("SGD", "torch.optim")
    assert p.layers[FORWARD.index("features.0")].op_type == "Conv2d"
    assert p.layers[len(FORWARD)].op_type == "CrossEntropyLoss (backward)"
    for i in range(len(p.layers)):
        assert np.all(p.durations_ns(i) > 0)
    # the backward rows come after the forward's, nested in their parent's, the step after them all
    for r in range(len(p.runs)):
        spans = _spans(p, r)
        assert spans["features.0 (backward)"][0] >= spans["features (backward)"][0]
        assert spans["features.0 (backward)"][1] <= spans["features (backward)"][1]
        assert spans["fc (backward)"][0] >= spans["CrossEntropyLoss"][1]
        assert spans["optimizer.step (SGD)"][0] >= spans["features (backward)"][1]
    flops = {layer.name: layer.flops for layer in p.layers}
    conv0, conv2 = 2 * 2 * 8 * 8 * 8 * 3 * 9, 2 * 2 * 8 * 8 * 8 * 8 * 9  # 2 FLOPs a multiply-add
    out = 2 * 8 * 8 * 8  # each conv's output elements: its bias adds 1 each (as the cost model's Conv)
    assert flops["features.0"] == conv0 + out and flops["features.2"] == conv2 + out
    # the gradients of its input and of its weight, and its bias's (a sum over the output gradient)
    assert flops["features.2 (backward)"] == 2 * conv2 + out
    assert flops["features.0 (backward)"] == conv0 + out  # of its weight and bias only: the data needs none
    assert flops["features.1 (backward)"] == 2 * 8 * 8 * 8  # threshold_backward: 1 FLOP per gradient element
    # the loss re-run on zeros of its recorded shapes (logits 2x4, targets 2): log_softmax 5 FLOPs an
    # element (as the cost model's LogSoftmax), nll 1 per target; its backward the same two, inverted
    assert flops["CrossEntropyLoss"] == 5 * 2 * 4 + 2
    assert flops["CrossEntropyLoss (backward)"] is not None and flops["CrossEntropyLoss (backward)"] > 0
    # SGD with momentum, replayed on meta tensors: buf*m, buf+g, p-lr*buf (a multiply and an add)
    params = sum(p.numel() for p in net.parameters())
    assert flops["optimizer.step (SGD)"] == 4 * params
    assert not [w for w in p.warnings if "unknown" in w]
    again = layerperf.load(tmp_path / "train")
    assert [layer.name for layer in again.layers] == [layer.name for layer in p.layers]
    assert [layer.parent for layer in again.layers] == [layer.parent for layer in p.layers]
    capsys.readouterr()
    assert main(["analyze", str(tmp_path / "train" / "trace.json"), "--top", "40"]) == 0
    out = capsys.readouterr().out
    assert "features.0 (backward)" in out and "optimizer.step (SGD)" in out


class _SlowBackward(torch.autograd.Function):
    """Identity whose backward sleeps: a backward that takes a known time."""

    @staticmethod
    def forward(ctx: object, x: torch.Tensor) -> torch.Tensor:
        return x.clone()

    @staticmethod
    def backward(ctx: object, grad: torch.Tensor) -> torch.Tensor:
        time.sleep(0.05)
        return grad


class Slow(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _SlowBackward.apply(x)


def test_backward_row_times_the_modules_own_backward() -> None:
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(4, 4), Slow(), nn.Linear(4, 2))
    x = torch.randn(3, 4)
    with lt.Profiler() as prof:
        net(x).sum().backward()
    p = prof.profile
    names = [layer.name for layer in p.layers]
    slow, first = names.index("1 (backward)"), names.index("0 (backward)")
    assert p.durations_ns(slow)[0] >= 50_000_000  # the sleep is in its own backward row
    assert p.durations_ns(names.index("1"))[0] < 50_000_000  # and not in its forward
    assert p.durations_ns(first)[0] < 50_000_000  # nor in its neighbour's backward
    spans = _spans(p, 0)
    assert spans["1 (backward)"][1] <= spans["0 (backward)"][0]  # autograd order: the later module first


def test_profiled_training_computes_what_unprofiled_does() -> None:
    """The hooks change nothing the model computes: in-place ReLU on a module output, weights after 2 steps."""
    results = []
    for profiled in (False, True):
        net, loss_fn, opt, x, y = _setup(seed=1)
        prof = lt.Profiler().start() if profiled else None
        for _ in range(2):
            loss = loss_fn(net(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
        if prof is not None:
            assert len(prof.stop().runs) == 2
        results.append([p.detach().clone() for p in net.parameters()])
    assert all(torch.equal(a, b) for a, b in zip(*results, strict=True))


def test_with_block_runs_are_model_calls_with_what_follows() -> None:
    net, loss_fn, opt, x, y = _setup()
    with lt.Profiler(warmup=1) as prof:
        for _ in range(3):
            loss = loss_fn(net(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
    p = prof.profile
    assert len(p.runs) == 2
    names = [layer.name for layer in p.layers]
    assert names == [*FORWARD, *BACKWARD, "optimizer.step (SGD)"]
    for run in p.runs:  # each run ends at its last boundary: the step
        last = max(s.start_ns + s.dur_ns for s in run.spans)
        assert run.start_ns + run.dur_ns == last
    assert p.runs[0].start_ns + p.runs[0].dur_ns <= p.runs[1].start_ns


def test_functional_loss_has_no_row() -> None:
    net, _, opt, x, y = _setup()

    @lt.profile()
    def step() -> None:
        loss = nn.functional.cross_entropy(net(x), y)
        loss.backward()
        opt.step()

    step()
    names = [layer.name for layer in step.profiler.stop().layers]  # type: ignore[attr-defined]
    assert not any("Loss" in n for n in names) and "fc (backward)" in names and names[-1] == "optimizer.step (SGD)"


def test_nested_call_of_the_decorated_function_is_part_of_the_outer_run() -> None:
    net, loss_fn, opt, x, y = _setup()

    @lt.profile()
    def forward(inner: bool) -> torch.Tensor:
        return forward(False) if inner else net(x)

    forward(True)
    p = forward.profiler.stop()  # type: ignore[attr-defined]
    assert len(p.runs) == 1 and all(row["calls"] == 1 for row in p.table())


def test_level2_training_step() -> None:
    net, loss_fn, opt, x, y = _setup()

    @lt.profile(level=2)
    def step() -> None:
        loss = loss_fn(net(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()

    step()
    step()
    p = step.profiler.stop()  # type: ignore[attr-defined]
    by_name = {layer.name: layer for layer in p.layers}
    assert by_name["features.0/aten::conv2d"].parent == "features.0"
    # level 1's count of the same call: the multiply-adds and the bias add
    assert by_name["features.0/aten::conv2d"].flops == 2 * 2 * 8 * 8 * 8 * 3 * 9 + 2 * 8 * 8 * 8
    assert "features.0 (backward)" in by_name and "optimizer.step (SGD)" in by_name
    assert any(n.startswith("optimizer.step (SGD)/aten::") for n in by_name)
    assert len(p.runs) == 2 and all(np.all(p.durations_ns(i) > 0) for i in range(len(p.layers)))


def _global_hooks() -> int:
    from torch.nn.modules import module as torch_module
    from torch.optim import optimizer as torch_optim

    return (len(torch_module._global_forward_pre_hooks) + len(torch_module._global_forward_hooks)
            + len(torch_optim._global_optimizer_pre_hooks) + len(torch_optim._global_optimizer_post_hooks))


def test_hooks_only_during_calls_and_a_failing_call_leaves_none() -> None:
    net, loss_fn, opt, x, y = _setup()
    before = _global_hooks()
    seen: list[int] = []

    @lt.profile()
    def step(fail: bool) -> None:
        seen.append(_global_hooks())
        loss = loss_fn(net(x), y)
        loss.backward()
        if fail:
            raise RuntimeError("the user's own error")
        opt.step()

    step(False)
    assert _global_hooks() == before  # off between calls
    with pytest.raises(RuntimeError, match="own error"):
        step(True)
    assert _global_hooks() == before
    step(False)
    p = step.profiler.stop()  # type: ignore[attr-defined]
    assert seen == [before + 4] * 3
    assert len(p.runs) == 3
    calls = {row["name"]: row["calls"] for row in p.table()}
    assert calls["optimizer.step (SGD)"] == 2 and calls["fc (backward)"] == 3


@pytest.mark.parametrize("make", [lambda ps: torch.optim.SGD(ps, lr=0.1), lambda ps: torch.optim.AdamW(ps),
                                  lambda ps: torch.optim.Adam(ps, foreach=True),
                                  lambda ps: torch.optim.RMSprop(ps, momentum=0.5)])
def test_optimizer_steps_are_counted_without_touching_the_model(make: Any) -> None:
    """Each optimizer's step replayed on meta tensors (same class, options and state, per-parameter loop):
    known FLOPs, at least one an element of every stepped parameter; the model's weights and the
    optimizer's state untouched by the replay."""
    net, loss_fn, _, x, y = _setup()
    opt = make(net.parameters())

    @lt.profile(warmup=1)
    def step() -> None:
        loss = loss_fn(net(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()

    for _ in range(3):
        step()
    weights = [p.detach().clone() for p in net.parameters()]
    state = {k: {n: v.clone() if isinstance(v, torch.Tensor) else v for n, v in st.items()}
             for k, st in opt.state_dict()["state"].items()}
    prof = step.profiler.stop()
    row = next(layer for layer in prof.layers if layer.name.startswith("optimizer.step"))
    assert row.flops is not None and row.flops >= sum(p.numel() for p in net.parameters())
    assert all(torch.equal(a, b) for a, b in zip(weights, net.parameters(), strict=True))
    after = opt.state_dict()["state"]
    for k, st in state.items():
        for n, v in st.items():
            assert torch.equal(after[k][n], v) if isinstance(v, torch.Tensor) else after[k][n] == v


def test_costs_rerun_leaves_buffers_and_random_state_as_they_were() -> None:
    torch.manual_seed(0)
    net = nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.Dropout(0.5), nn.Flatten(), nn.LazyLinear(2))
    x = torch.randn(2, 3, 6, 6)
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    prof = lt.Profiler().start()
    net(x).sum().backward()
    opt.step()
    buffers = [b.clone() for b in net.buffers()]
    params = [p.detach().clone() for p in net.parameters()]
    rng = torch.get_rng_state()
    p = prof.stop()  # re-runs forward and backward for the costs
    assert all(torch.equal(a, b) for a, b in zip(buffers, net.buffers(), strict=True))
    assert all(torch.equal(a, b) for a, b in zip(params, net.parameters(), strict=True))
    assert all(q.grad is not None for q in net.parameters())
    assert torch.equal(rng, torch.get_rng_state())
    back = {layer.name: layer.flops for layer in p.layers}["0 (backward)"]
    assert back == 2 * 2 * 4 * 4 * 4 * 3 * 9 + 2 * 4 * 4 * 4  # its weight's gradient, and its bias's (a sum)


class TwoOut(nn.Module):
    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return x * 2, x.exp()


def test_backward_of_an_output_the_loss_does_not_use_ends_with_the_backward() -> None:
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(3, 3), TwoOut())
    x = torch.randn(2, 3)
    with lt.Profiler() as prof:
        a, _unused = net(x)
        a.sum().backward()
    p = prof.profile
    names = [layer.name for layer in p.layers]
    assert "1 (backward)" in names and "0 (backward)" in names
    assert any("ended with the backward pass" in w for w in p.warnings)
    spans = _spans(p, 0)  # its row runs on to the backward's end: the Linear's backward falls inside it
    assert spans["1 (backward)"][0] < spans["0 (backward)"][0] <= spans["0 (backward)"][1] <= spans["1 (backward)"][1]
