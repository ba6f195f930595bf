"""The collector's parts on their own: the run loop's between-runs hook, the speed check of a profile's runs,
configuration keys and the sweep's expansion, the store's write rules, CPU sets, the co-runner's placement,
the machine's cache sizes, what a local Ray instance listens on."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import pytest

from layerperf.backends.common import interleaved
from layerperf.bench.corun import CorunSpec, placement
from layerperf.data.machine import Machine, cache_sizes
from layerperf.dataset.config import Axes, Config, expand
from layerperf.dataset.fingerprint import Fingerprint
from layerperf.dataset.measure import ConfigResult, failed
from layerperf.dataset.ray_runner import _address, _loopback
from layerperf.dataset.speedcheck import SpeedRecorder
from layerperf.dataset.store import Store
from layerperf.errors import InputError
from layerperf.util.affinity import allowed_cpus, format_cpus, parse_cpus, pinned

from conftest import run_cli


def test_the_hook_brackets_every_block_outside_the_timed_calls() -> None:
    log: list[str] = []
    interleaved(lambda: log.append("plain"), lambda: log.append("run"), 3, between=lambda n: log.append(f"b{n}"))
    assert log == ["b0", "plain", "run", "b1", "plain", "run", "b2", "plain", "run", "b3"]


def _recorder(readings: list[float]) -> SpeedRecorder:
    values = iter(readings)
    return SpeedRecorder(ruler=lambda: next(values), waited=lambda: None)


def test_runs_around_a_slow_reading_are_set_aside() -> None:
    # 5 first-look readings, then one before each of 8 runs and one after the last
    hook = _recorder([10.0] * 5 + [10, 10, 10, 10, 20, 10, 10, 10, 10.0])
    for done in range(9):
        hook(done)
    v = hook.verdict(8)
    # reading 4 is slow: runs 2..5 (within one slot of it) are set aside
    assert v.used == (0, 1, 6, 7) and v.slowed == 4 and not v.slowed_used and v.reference_ns == 10


def test_a_profile_slowed_throughout_is_flagged_not_hidden() -> None:
    hook = _recorder([10.0] * 5 + [20.0] * 5)
    for done in range(5):
        hook(done)
    v = hook.verdict(4)
    assert v.slowed_used and v.slowed == 4 and v.used == (0, 1, 2, 3)
    # a remembered full speed finds a whole profile slowed even without a fast reading of its own
    hook = _recorder([20.0] * 10)
    for done in range(5):
        hook(done)
    assert hook.verdict(4, remembered_ns=10.0).slowed_used


def test_runs_that_waited_for_a_cpu_are_set_aside_as_disturbed() -> None:
    clock, waits = iter(range(0, 10_000, 1000)), iter([0, 0, 0, 500, 500, 500])  # run 2 waited 500 of 1000 ns
    hook = SpeedRecorder(ruler=lambda: 10.0, waited=lambda: next(waits), clock=lambda: next(clock))
    for done in range(6):
        hook(done)
    v = hook.verdict(5)
    assert v.used == (0, 1, 3, 4) and v.disturbed == 1 and v.slowed == 0 and not v.disturbed_used


def test_loops_split_over_sessions_follow_each_other() -> None:
    hook = _recorder([10.0] * 5 + [10.0] * 7 + [30.0])
    for done in (0, 1, 2, 3, 0, 1, 2, 3):  # two loops of three runs (ONNX Runtime's sessions)
        hook(done)
    assert hook.bounds == [(0, 1), (1, 2), (2, 3), (4, 5), (5, 6), (6, 7)]
    v = hook.verdict(6)
    assert v.used == (0, 1, 2, 3) and v.slowed == 2


def test_a_key_names_every_factor_and_the_sweep_collapses_what_does_not_apply() -> None:
    c = Config(model="resnet18", backend="onnxruntime", batch=1, threads=2, opt_level="all")
    assert c.key() == ("model=resnet18;backend=onnxruntime;batch=1;threads=2;opt_level=all;inter_op=seq;cpus=;"
                       "corun=;corun_cores=;events=;runs=10;warmup=3")
    beside = Config(model="resnet18", backend="onnxruntime", batch=1, threads=2, opt_level="all", corun="Relu:X=8",
                    corun_cores="shared")
    assert beside.alone_key() == c.key() and beside.key() != c.key()
    configs = expand(Axes(models=("resnet18",), backends=("onnxruntime", "torch"), batches=(1, 8), threads=(1,),
                          opt_levels=("basic", "all"), inter_ops=(None, 2)))
    ort = [x for x in configs if x.backend == "onnxruntime"]
    torch = [x for x in configs if x.backend == "torch"]
    assert len(ort) == 2 * 2 * 2 and len(torch) == 2  # torch has no opt level nor execution mode
    assert {(x.opt_level, x.inter_op) for x in torch} == {(None, None)}
    assert len({x.key() for x in configs}) == len(configs)
    # a seed other than 0 is a factor of built-in models only, last in the key
    seeded = dataclasses.replace(c, model_seed=1)
    assert seeded.key() == c.key() + ";model_seed=1" and seeded.label().endswith("model seed 1")
    both = expand(Axes(models=("resnet18", __file__), model_seeds=(0, 1)))
    assert [(x.model, x.model_seed) for x in both] == [("resnet18", 0), ("resnet18", 1), (__file__, 0)]


def _ok(cfg: Config) -> ConfigResult:
    return ConfigResult(cfg, Fingerprint.here(), "ok", None, "2026-01-01T00:00:00+00:00", 1.0, attempts=1)


def test_the_store_holds_a_configuration_once_and_replaces_a_failure_by_a_success(tmp_path: Path) -> None:
    cfg = Config(model="m", backend="onnxruntime", batch=None, threads=1)
    with Store.open(tmp_path / "s.db", create=True) as store:
        assert store.write(failed(cfg, "boom"))
        assert not store.write(failed(cfg, "boom again"))
        assert store.statuses() == {cfg.key(): "failed"}
        assert store.write(_ok(cfg))
        assert not store.write(_ok(cfg)) and not store.write(failed(cfg, "late"))
        assert store.statuses() == {cfg.key(): "ok"} and store.counts()["configs"] == 1


def test_an_interrupt_inside_a_write_leaves_nothing_of_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = Config(model="m", backend="onnxruntime", batch=None, threads=1)
    with Store.open(tmp_path / "s.db", create=True) as store:
        real = store._insert

        def interrupted(table: str, *a: object, **k: object) -> int:
            if table == "configs":
                raise KeyboardInterrupt
            return real(table, *a, **k)  # type: ignore[arg-type]

        monkeypatch.setattr(store, "_insert", interrupted)
        with pytest.raises(KeyboardInterrupt):
            store.write(_ok(cfg))
        assert store.counts()["machines"] == 0 and store.counts()["configs"] == 0


def test_cpu_lists() -> None:
    assert parse_cpus("0-3,6") == {0, 1, 2, 3, 6} and format_cpus({6, 0, 1, 2, 3}) == "0-3,6"
    assert format_cpus(parse_cpus("1, 3")) == "1,3"
    for bad in ("", "a", "3-1", "1-"):
        with pytest.raises(InputError):
            parse_cpus(bad)
    first = min(allowed_cpus())
    before = os.sched_getaffinity(0)
    with pinned(frozenset({first})):
        assert os.sched_getaffinity(0) == {first}
    assert os.sched_getaffinity(0) == before


def test_a_corunner_goes_beside_or_onto_the_run() -> None:
    assert CorunSpec.parse("MatMul:A=8x8,B=8x8").text() == "MatMul:A=8x8,B=8x8"
    with pytest.raises(InputError):
        CorunSpec.parse("MatMul:A=8y8")
    allowed = allowed_cpus()
    run, beside = placement(None, 1, "shared")
    assert run is None and beside == allowed
    if len(allowed) > 1:
        run, beside = placement(None, 1, "separate")
        assert run is not None and len(run) == 1 and beside == allowed - run
    with pytest.raises(InputError, match="no CPU is left"):
        placement(allowed, 1, "separate")


def test_the_fingerprint_has_the_cache_sizes(tmp_path: Path) -> None:
    for index, (level, kind, size) in enumerate([("1", "Data", "48K"), ("1", "Instruction", "32K"),
                                                 ("2", "Unified", "2048K"), ("3", "Unified", "105M")]):
        d = tmp_path / f"index{index}"
        d.mkdir()
        (d / "level").write_text(level + "\n")
        (d / "type").write_text(kind + "\n")
        (d / "size").write_text(size + "\n")
    assert cache_sizes(tmp_path) == {"l1d_bytes": 48 << 10, "l1i_bytes": 32 << 10, "l2_bytes": 2 << 20,
                                     "l3_bytes": 105 << 20}
    old = Machine.from_json({"cpu": "x", "cores": 2})
    assert old.l3_bytes is None and "l3_bytes" not in old.to_json()  # an older trace is written back as it was


def test_listening_addresses_are_read_as_the_kernel_writes_them() -> None:
    assert _address("0100007F:1F90") == "127.0.0.1:8080"
    assert _address("00000000000000000000000000000000:0050") == ":::80"
    assert _address("0000000000000000FFFF00000100007F:0050") == "::ffff:127.0.0.1:80"
    assert _loopback("127.0.0.1:80") and _loopback("::ffff:127.0.0.1:80") and _loopback("::1:80")
    assert not _loopback(":::80") and not _loopback("0.0.0.0:80") and not _loopback("192.0.2.2:80")


def test_onnx_runtimes_parallel_mode_profiles(tiny_model_path: Path) -> None:
    r = run_cli("profile", str(tiny_model_path), "--runs", "2", "--warmup", "1", "--execution-mode", "parallel",
                "--inter-op-threads", "2", "--format", "json")
    assert r.returncode == 0, r.stderr
    r = run_cli("profile", str(tiny_model_path), "--runs", "2", "--inter-op-threads", "2")
    assert r.returncode == 2 and "--execution-mode parallel" in r.stderr


def test_bench_beside_a_corunner() -> None:
    import json

    r = run_cli("bench", "Relu", "--input", "X=1x256", "--samples", "5", "--min-time", "0.1ms", "--speed-wait", "0",
                "--no-overhead", "--corun", "Relu:X=1x4096", "--shared-cores", "--format", "json")
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout)
    assert got["corun"]["op"] == "Relu:X=1x4096" and got["corun"]["cores"] == "shared"
    assert got["corun"]["calls_per_s"] > 0 and got["corun_cores"] == "shared"
    assert any("measured beside Relu:X=1x4096" in w for w in got["warnings"])
    r = run_cli("bench", "Relu", "--input", "X=1x256", "--shared-cores")
    assert r.returncode == 2 and "applies to --corun" in r.stderr
