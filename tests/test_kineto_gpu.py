"""PyTorch GPU traces: every figure ``layerperf analyze`` prints for a real Kineto CUDA trace, against a
reference computed here from the raw events (interval containment and External ids, not layerperf's
nesting or linking code); FLOP/s of a GPU op over its kernels' time on a constructed trace.

The real trace (tests/data/torch_cuda, see its README) is one training step on a V100 recorded by
PyTorch 1.8/1.9's profiler.
"""

from __future__ import annotations

import gzip
import json
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import orjson
import pytest

from layerperf.cli import main

TRACE = Path(__file__).parent / "data" / "torch_cuda" / "trace.json.gz"


# -- reference, from the raw events ----------------------------------------------------------------
def _raw() -> list[dict[str, Any]]:
    with gzip.open(TRACE) as f:
        events: list[dict[str, Any]] = json.load(f)["traceEvents"]
    return events


class Ref:
    """CPU calls (operators and runtime calls) and device activities of the trace, in ns."""

    def __init__(self) -> None:
        events = [e for e in _raw() if e.get("ph") == "X"]
        cpu = [e for e in events if e["cat"] in ("Operator", "Runtime")]
        self.step = next(e for e in cpu if e["name"].startswith("ProfilerStep#"))
        self.rows = [e for e in cpu if e is not self.step]
        self.device = [e for e in events if e["cat"] in ("Kernel", "Memcpy", "Memset")]
        self.op_by_ext = {e["args"]["External id"]: e for e in self.rows if e["cat"] == "Operator"}

    @staticmethod
    def span(e: dict[str, Any]) -> tuple[int, int]:
        return e["ts"] * 1000, (e["ts"] + e["dur"]) * 1000

    def inside(self, inner: dict[str, Any], outer: dict[str, Any]) -> bool:
        (s1, e1), (s0, e0) = self.span(inner), self.span(outer)
        return inner is not outer and inner["tid"] == outer["tid"] and s0 <= s1 and e1 <= e0

    def self_ns(self, e: dict[str, Any]) -> int:
        """Duration minus the direct children's (contained calls with no container between)."""
        inner = [c for c in self.rows if self.inside(c, e)]
        direct = [c for c in inner if not any(self.inside(c, m) for m in inner)]
        return e["dur"] * 1000 - sum(c["dur"] * 1000 for c in direct)

    def owner(self, d: dict[str, Any]) -> dict[str, Any] | None:
        return self.op_by_ext.get(d["args"]["external id"])

    def device_self_ns(self, e: dict[str, Any]) -> int:
        return sum(d["dur"] * 1000 for d in self.device if self.owner(d) is e)

    def device_incl_ns(self, e: dict[str, Any]) -> int:
        return sum(d["dur"] * 1000 for d in self.device
                   if (o := self.owner(d)) is not None and (o is e or self.inside(o, e)))

    def outer(self, e: dict[str, Any], same: Any) -> bool:
        return not any(self.inside(e, o) for o in self.rows if same(o))


@pytest.fixture(scope="module")
def ref() -> Ref:
    return Ref()


def _analyze(capsys: pytest.CaptureFixture[str], *argv: str) -> list[dict[str, Any]]:
    assert main(["analyze", str(TRACE), "--top", "0", "--format", "json", *argv]) == 0
    rows: list[dict[str, Any]] = orjson.loads(capsys.readouterr().out)
    return rows


def _us(ns: float) -> Any:
    return pytest.approx(ns / 1e3, abs=1e-6)


# -- per op ----------------------------------------------------------------------------------------
def test_every_op_figure_matches_the_reference(ref: Ref, capsys: pytest.CaptureFixture[str]) -> None:
    rows = {r["name"]: r for r in _analyze(capsys)}
    by_name: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for e in ref.rows:
        by_name[e["name"]].append(e)
    assert set(rows) == set(by_name)  # every operator and runtime call, the ProfilerStep a frame
    for name, calls in by_name.items():
        row = rows[name]
        outer = [e for e in calls if ref.outer(e, lambda o, n=name: o["name"] == n)]
        assert row["calls"] == len(calls), name
        assert row["time_us"] == _us(sum(ref.self_ns(e) for e in calls)), name
        assert row["incl_us"] == _us(sum(e["dur"] * 1000 for e in outer)), name
        assert row["device_us"] == _us(sum(ref.device_self_ns(e) for e in calls)), name
        assert row["device_incl_us"] == _us(sum(ref.device_incl_ns(e) for e in outer)), name
        assert row["rate_time"] == ("device" if row["device_incl_us"] > 0 else "cpu"), name
        assert row["flops"] is None and row["flops_per_s"] is None  # the trace recorded neither shapes nor FLOPs


def test_parent_ops_get_their_childrens_device_time(ref: Ref, capsys: pytest.CaptureFixture[str]) -> None:
    rows = {r["name"]: r for r in _analyze(capsys)}
    linear = rows["aten::linear"]  # launches nothing itself; its aten::mm and aten::add_ do
    assert linear["device_us"] == 0
    kernels_under = [d for d in ref.device if (o := ref.owner(d)) is not None
                     and any(ref.inside(o, e) for e in ref.rows if e["name"] == "aten::linear")]
    assert {ref.owner(d)["name"] for d in kernels_under} == {"aten::mm", "aten::add_"}  # type: ignore[index]
    assert kernels_under and linear["device_incl_us"] == _us(sum(d["dur"] * 1000 for d in kernels_under))


def test_provider_sums_never_exceed_what_ran(ref: Ref, capsys: pytest.CaptureFixture[str]) -> None:
    (cpu,) = _analyze(capsys, "--aggregate-by", "provider")  # every activity is linked: no GPU rows
    top = [e for e in ref.rows if ref.outer(e, lambda o: True)]
    threads = {e["tid"] for e in ref.rows}
    spans = sum(max(ref.span(e)[1] for e in ref.rows if e["tid"] == t) - min(ref.span(e)[0] for e in ref.rows
                                                                             if e["tid"] == t) for t in threads)
    assert cpu["incl_us"] == _us(sum(e["dur"] * 1000 for e in top))
    assert cpu["incl_us"] * 1e3 <= spans  # each thread's busy time at most its span
    assert cpu["time_us"] == _us(sum(ref.self_ns(e) for e in ref.rows))
    all_device = sum(d["dur"] * 1000 for d in ref.device)
    assert cpu["device_incl_us"] == _us(all_device) == cpu["device_us"]


# -- per kernel ------------------------------------------------------------------------------------
def test_kernel_view(ref: Ref, capsys: pytest.CaptureFixture[str]) -> None:
    rows = {r["name"]: r for r in _analyze(capsys, "--aggregate-by", "kernel")}
    groups: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for d in ref.device:
        groups[d["name"]].append(d)
    assert set(rows) == set(groups)
    all_ns = sum(d["dur"] * 1000 for d in ref.device)
    for name, acts in groups.items():
        row = rows[name]
        launchers = Counter(ref.owner(d)["name"] for d in acts)  # type: ignore[index]
        launcher_ns = sum(d["dur"] * 1000 for d in ref.device if ref.owner(d)["name"] in launchers)  # type: ignore[index]
        total = sum(d["dur"] * 1000 for d in acts)
        assert (row["calls"], row["total_us"], row["mean_us"]) == (len(acts), _us(total), _us(total / len(acts)))
        assert row["share"] == pytest.approx(total / all_ns)
        assert row["launcher_share"] == pytest.approx(total / launcher_ns)
        assert row["launched_by"] == ", ".join(f"{op} ({n})" for op, n in launchers.most_common())
    totals = [r["total_us"] for r in _analyze(capsys, "--aggregate-by", "kernel")]
    assert totals == sorted(totals, reverse=True)
    calls = [r["calls"] for r in _analyze(capsys, "--aggregate-by", "kernel", "--order-by", "calls")]
    assert calls == sorted(calls, reverse=True)
    gemms = _analyze(capsys, "--aggregate-by", "kernel", "--name", "gemm")
    assert {r["name"] for r in gemms} == {n for n in groups if "gemm" in n} != set()
    assert main(["analyze", str(TRACE), "--aggregate-by", "kernel", "--order-by", "flops"]) == 2
    assert "unknown --order-by column 'flops'" in capsys.readouterr().err


def test_kernel_view_needs_kernels(capsys: pytest.CaptureFixture[str]) -> None:
    cpu_trace = Path(__file__).parent / "data" / "torch_cpu" / "trace.json.gz"
    assert main(["analyze", str(cpu_trace), "--aggregate-by", "kernel"]) == 2
    assert "no GPU kernels" in capsys.readouterr().err


# -- FLOP/s over device time -----------------------------------------------------------------------
def _x(cat: str, name: str, ts: float, dur: float, tid: int, **args: Any) -> dict[str, Any]:
    return {"ph": "X", "cat": cat, "name": name, "pid": 1 if cat in ("cpu_op", "cuda_runtime") else 0, "tid": tid,
            "ts": ts, "dur": dur, "args": args}


def test_flops_per_s_of_a_gpu_op_is_over_its_kernels(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    m, k, n = 64, 512, 1000
    events = [
        _x("cpu_op", "aten::linear", 0, 100, 1, **{"External id": 1}),
        _x("cpu_op", "aten::addmm", 10, 80, 1, **{"External id": 2, "Input Dims": [[n], [m, k], [k, n]]}),
        _x("cuda_runtime", "cudaLaunchKernel", 20, 5, 1, correlation=11),
        _x("cuda_runtime", "cudaLaunchKernel", 40, 5, 1, correlation=12),
        _x("kernel", "gemm_part_1", 200, 9.25, 7, correlation=11, device=0),
        _x("kernel", "gemm_part_2", 210, 4.625, 7, correlation=12, device=0),
        _x("cpu_op", "aten::mm", 300, 40, 1, **{"External id": 3, "Input Dims": [[m, k], [k, n]]}),  # on the CPU
    ]
    path = tmp_path / "trace.json"
    path.write_bytes(orjson.dumps({"schemaVersion": 1, "traceEvents": events}))
    rows = {r["name"]: r for r in _analyze_file(capsys, path)}
    flops = 2 * m * k * n  # one multiply-add = 2 FLOPs
    addmm, linear, mm = rows["aten::addmm"], rows["aten::linear"], rows["aten::mm"]
    kernels_s = (9.25 + 4.625) * 1e-6
    addmm_flops = flops + m * n  # and the bias added to each output
    assert addmm["flops"] == addmm_flops and addmm["rate_time"] == "device"
    assert addmm["flops_per_s"] == pytest.approx(addmm_flops / kernels_s)  # not over its 70 µs of CPU self time
    assert linear["device_us"] == 0 and linear["device_incl_us"] == pytest.approx(13.875)
    assert mm["rate_time"] == "cpu" and mm["flops_per_s"] == pytest.approx(flops / 40e-6)


def _analyze_file(capsys: pytest.CaptureFixture[str], path: Path) -> list[dict[str, Any]]:
    assert main(["analyze", str(path), "--top", "0", "--format", "json"]) == 0
    rows: list[dict[str, Any]] = orjson.loads(capsys.readouterr().out)
    return rows
