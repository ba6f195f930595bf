"""`layerperf collect`: sweeps into an SQLite store — every configuration once, failures recorded, nothing lost
when killed (a real subprocess, SIGKILL and SIGINT), bad stores and bad input refused in one line, Parquet export."""

from __future__ import annotations

import contextlib
import dataclasses
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import onnx
import pytest

import layerperf
from layerperf.cli import main
from layerperf.data.records import LayerRecord
from layerperf.dataset.schema import SCHEMA_VERSION

from conftest import tiny_cnn

FAST = ["--runs", "2", "--warmup", "1"]


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("collect-models")
    out = {"fixed": d / "fixed.onnx", "dynamic": d / "dynamic.onnx", "corrupt": d / "corrupt.onnx"}
    onnx.save(tiny_cnn(), out["fixed"])
    onnx.save(tiny_cnn(batch="N"), out["dynamic"])
    out["corrupt"].write_bytes(b"\x08\x07this is no onnx model" * 20)
    return out


def rows(store: Path, sql: str) -> list[tuple]:
    db = sqlite3.connect(store)
    try:
        return db.execute(sql).fetchall()
    finally:
        db.close()


def collect(*args: str) -> int:
    return main(["collect", *args])


def test_a_sweep_stores_every_configuration_once_and_records_failures(models: dict[str, Path], tmp_path: Path,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    store = tmp_path / "s.db"
    argv = ["--models", ",".join(str(models[k]) for k in ("fixed", "dynamic", "corrupt")), "--batch", "1,2",
            "--threads", "1,2", "--store", str(store), *FAST]
    assert collect(*argv) == 0
    out = capsys.readouterr()
    # fixed: batch does not apply (2 configurations); dynamic: 2 batches x 2 threads; corrupt: 4, failed
    assert "collected 10 configurations (6 ok, 4 failed" in out.out
    assert rows(store, "SELECT version FROM schema_version") == [(SCHEMA_VERSION,)]
    statuses = dict(rows(store, "SELECT status, count(*) FROM configs GROUP BY status"))
    assert statuses == {"ok": 6, "failed": 4}
    reasons = rows(store, "SELECT DISTINCT reason FROM configs WHERE status = 'failed'")
    assert len(reasons) == 1 and "corrupt.onnx" in reasons[0][0] and "\n" not in reasons[0][0]
    # each ok configuration's layers are all there, every LayerRecord field a column
    for config_id, n in rows(store, "SELECT config_id, layers FROM configs WHERE status = 'ok'"):
        assert n == 5 and rows(store, f"SELECT count(*) FROM layers WHERE config_id = {config_id}") == [(5,)]
    cols = [r[1] for r in rows(store, "PRAGMA table_info(layers)")]
    assert cols == ["config_id", *(f.name for f in dataclasses.fields(LayerRecord))]
    # the batch reached the file's free leading dimension
    shapes = rows(store, "SELECT c.batch, l.in_shapes FROM layers l JOIN configs c USING (config_id) "
                         "WHERE c.model LIKE '%dynamic.onnx' AND l.layer_index = 0")
    assert {(b, s.split(";")[0].split("x")[0]) for b, s in shapes} == {(1, "1"), (2, "2")}
    machine = rows(store, "SELECT cpu, cores, hostname, layerperf_version, runtimes FROM machines")
    assert len(machine) == 1 and machine[0][1] and "onnxruntime=" in machine[0][4]
    speed = rows(store, "SELECT runs_measured, runs_used, runs_slowed, slowed_used FROM configs WHERE status = 'ok'")
    assert all(m == 2 and used + slowed * (not flag) >= used and used >= 1 for m, used, slowed, flag in speed)
    # each configuration in a worker of its own (one worker measured them all: its state carried over)
    workers = rows(store, "SELECT worker FROM configs")
    assert len({w for (w,) in workers}) == len(workers) == 10

    # the same command again: nothing measured, nothing added
    before = rows(store, "SELECT count(*) FROM layers")
    assert collect(*argv) == 0
    assert "collected 0 configurations (0 ok, 0 failed); 10 already in the store (4 of them failed: " \
           "--retry-failed measures those again)" in capsys.readouterr().out
    assert rows(store, "SELECT count(*) FROM layers") == before
    assert rows(store, "SELECT count(*), count(DISTINCT config_key) FROM configs") == [(10, 10)]


def test_the_factors_reach_the_rows(models: dict[str, Path], tmp_path: Path) -> None:
    """Parallel execution with inter-op threads, a CPU set, a co-runner beside the run."""
    if len(os.sched_getaffinity(0)) < 2 or 0 not in os.sched_getaffinity(0):
        pytest.skip("needs CPU 0 and another one: the co-runner goes on separate cores")
    store = tmp_path / "f.db"
    assert collect("--models", str(models["fixed"]), "--inter-op", "seq,2", "--cpus", "0", "--corun",
                   "Relu:X=1x4096", "--store", str(store), *FAST) == 0
    got = rows(store, "SELECT inter_op, cpus, run_cpus, corun, corun_cores, corun_cpus, corun_calls_per_s, status "
                      "FROM configs ORDER BY config_id")
    assert [(g[0], g[1], g[2], g[3]) for g in got] == [(None, "0", "0", ""), (None, "0", "0", "Relu:X=1x4096"),
                                                        (2, "0", "0", ""), (2, "0", "0", "Relu:X=1x4096")]
    assert all(g[7] == "ok" for g in got)
    beside = [g for g in got if g[3]]
    assert all(g[4] == "separate" and g[5] and "0" not in g[5].split(",") and g[6] > 0 for g in beside)
    options = {r[0] for r in rows(store, "SELECT DISTINCT options FROM layers")}
    assert any("execution_mode=parallel;inter_op_threads=2" in o for o in options)
    factors = rows(store, "SELECT count(*) FROM interference")
    assert factors == [(10,)]  # 5 layers x 2 execution modes, each against its run alone


def test_each_model_seed_builds_the_built_in_models_anew_a_file_is_collected_once(
        models: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`--model-seed 0,1`: a built-in model (a kernel sweep's other sample) built with each seed, each a
    configuration of its own; seed 0's key as stores made before seeds hold it; a file once, with seed 0;
    `profile --model-seed` runs the same build."""
    from layerperf.models import zoo
    from layerperf.models.extdata import sha256

    store = tmp_path / "seeds.db"
    argv = ["--models", f"lstm,{models['fixed']}", "--model-seed", "0,1", "--store", str(store), *FAST]
    assert collect(*argv) == 0
    assert "collected 3 configurations (3 ok, 0 failed" in capsys.readouterr().out  # (a busy host: flagged too)
    got = rows(store, "SELECT c.model, c.model_seed, c.config_key, min(l.model_sha256), max(l.model_sha256) "
                      "FROM configs c JOIN layers l USING (config_id) GROUP BY c.config_id ORDER BY c.config_id")
    assert [(g[0], g[1]) for g in got] == [("lstm", 0), ("lstm", 1), (str(models["fixed"]), 0)]
    assert "seed=" not in got[0][2] and got[1][2] == got[0][2] + ";model_seed=1" and "seed=" not in got[2][2]
    for model, seed, _, first, last in got[:2]:  # the layers ran the model built with that seed
        assert first == last == sha256(zoo.path(model, batch=1, seed=seed))
    assert got[0][3] != got[1][3]
    assert collect(*argv) == 0  # again: all three held, none added
    assert "3 already in the store" in capsys.readouterr().out
    assert rows(store, "SELECT count(*) FROM configs") == [(3,)]
    assert rows(store, "SELECT DISTINCT model_seed FROM measured_layers WHERE model_name = 'lstm'") == [(0,), (1,)]
    prof = layerperf.profile("lstm", batch=1, model_seed=1, runs=1, warmup=0, latency=False)
    assert prof.metadata.model.sha256 == got[1][3] and prof.metadata.model.zoo_options == {"batch": 1, "seed": 1}


@pytest.mark.parametrize(("models_arg", "seed", "says"), [
    ("FILE", "1", "--model-seed builds built-in models"),  # a file is as it is
    ("lstm", str(1 << 63), "--model-seed values must be below 2**63"),  # no SQLite integer: refused, not a traceback
    ("lstm", "-1", "--model-seed: '-1' is not an integer of 0 or more"),
    ("lstm", "\u00b2", "is not an integer of 0 or more"),  # a digit to str.isdigit, not to int()
])
def test_a_model_seed_that_cannot_be_collected_is_refused(models: dict[str, Path], tmp_path: Path, models_arg: str,
                                                          seed: str, says: str,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    store = tmp_path / "none.db"
    target = str(models["fixed"]) if models_arg == "FILE" else models_arg
    assert collect("--models", target, "--model-seed", seed, "--store", str(store), *FAST) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) <= 2 and says in err[0] and "Traceback" not in "".join(err)
    assert not store.exists()


def test_beside_a_co_runner_on_the_same_cores_every_run_is_kept(models: dict[str, Path], tmp_path: Path) -> None:
    """Its waits are the interference measured: no run set aside, the counts unknown (nothing was judged)."""
    store = tmp_path / "s.db"
    assert collect("--models", str(models["fixed"]), "--corun", "Relu:X=1x4096", "--shared-cores", "--store",
                   str(store), *FAST) == 0
    got = rows(store, "SELECT corun, corun_cores, runs_measured, runs_used, runs_slowed, runs_disturbed, attempts, "
                      "slowed_used, disturbed_used, status FROM configs ORDER BY config_id")
    alone, beside = got
    assert alone[0] == "" and alone[4] is not None and alone[5] is not None  # judged
    assert beside[:2] == ("Relu:X=1x4096", "shared") and beside[-1] == "ok"
    assert beside[2] == beside[3] and beside[4] is None and beside[5] is None and beside[6] == 1
    assert beside[7] == 0 and beside[8] == 0  # nothing flagged: nothing set aside, nothing stood in for it


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGINT])
def test_a_killed_collect_loses_nothing_finished_and_resumes(models: dict[str, Path], tmp_path: Path,
                                                            sig: signal.Signals) -> None:
    store = tmp_path / "k.db"
    argv = [sys.executable, "-m", "layerperf", "collect", "--models", str(models["fixed"]), "--threads", "1,2",
            "--opt-level", "disable,basic,extended,all", "--runs", "150", "--warmup", "1", "--store", str(store)]
    with _sigint_as_in_a_terminal():
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                if rows(store, "SELECT count(*) FROM configs")[0][0] >= 2:
                    break
            except sqlite3.Error:  # not made yet
                pass
            time.sleep(0.05)
        exited_first = proc.poll() is not None  # it finished before two configurations were seen in the store
        workers = _children(proc.pid)
        proc.send_signal(sig)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == (-signal.SIGKILL if sig == signal.SIGKILL else 130), (
        f"exit {proc.returncode}, exited before the signal: {exited_first}; stdout: {out[-1500:]!r}; "
        f"stderr: {err[-1500:]!r}")
    assert rows(store, "PRAGMA integrity_check") == [("ok",)]
    done = rows(store, "SELECT config_id, layers FROM configs")
    assert 2 <= len(done) < 8, "killed before the end, after two configurations"
    for config_id, n in done:  # nothing half-written
        assert rows(store, f"SELECT count(*) FROM layers WHERE config_id = {config_id}") == [(n,)]
    _gone(workers)
    again = subprocess.run(argv, capture_output=True, text=True, timeout=600)
    assert again.returncode == 0, again.stderr
    assert f"{len(done)} already in the store" in again.stdout
    assert rows(store, "SELECT count(*), count(DISTINCT config_key) FROM configs") == [(8, 8)]
    assert rows(store, "SELECT count(*) FROM layers") == rows(store, "SELECT sum(layers) FROM configs")


@contextlib.contextmanager
def _sigint_as_in_a_terminal() -> Iterator[None]:
    """The collect started with SIGINT as a command run at a terminal has it, whatever this test run was started
    with. A non-interactive shell starts a background job (`make test > log &`) with SIGINT ignored, and an ignored
    signal stays ignored in every process started below it: the collect, rightly, ignored the test's SIGINT then
    (Python installs no KeyboardInterrupt handler for an ignored SIGINT) and measured all eight configurations,
    exit 0. A handled signal is reset to its default in a new program, so SIGINT is handled here while the
    collect is started."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        if previous is not None:  # None: not set from Python, and then not restorable from it
            signal.signal(signal.SIGINT, previous)


def _children(pid: int) -> list[int]:
    out = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1]) == pid:
                    out.append(int(entry.name))
            except (OSError, ValueError, IndexError):
                continue
    return out


def _gone(pids: list[int], timeout_s: float = 10.0) -> None:
    """The worker processes ended with their driver (no orphan measuring on)."""
    deadline = time.monotonic() + timeout_s
    alive = pids
    while alive and time.monotonic() < deadline:
        alive = [p for p in alive if Path(f"/proc/{p}").exists() and "Z" not in _state(p)]
        time.sleep(0.05)
    assert not alive, f"worker processes still running: {alive}"


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return "Z"


def _open_store(path: Path, go: Any, results: Any) -> None:
    from layerperf.dataset.store import Store

    go.wait()
    try:
        with Store.open(path, create=True) as store:
            store.statuses()
        results.put("ok")
    except BaseException as exc:  # noqa: BLE001 - what a racing opener met, for the test to show
        results.put(f"{type(exc).__name__}: {exc}")


def test_collects_that_start_together_on_a_new_store_make_it_once(tmp_path: Path) -> None:
    # each opener made the tables when it found the file new: the others failed ('table schema_version already
    # exists', 'not a layerperf store') and removed the file the first had filled
    import multiprocessing

    ctx = multiprocessing.get_context("fork")
    for k in range(16):  # the race is met in about one round in three
        path = tmp_path / f"s{k}.db"
        go, results = ctx.Event(), ctx.Queue()
        openers = [ctx.Process(target=_open_store, args=(path, go, results)) for _ in range(4)]
        for p in openers:
            p.start()
        go.set()
        for p in openers:
            p.join(60)
        assert [results.get(timeout=10) for _ in openers] == ["ok"] * 4
        assert path.exists()


def test_profile_refuses_a_model_seed_for_a_model_file(models: dict[str, Path],
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["profile", str(models["fixed"]), "--model-seed", "1", "--runs", "1", "--warmup", "0"]) == 2
    assert capsys.readouterr().err.strip() == \
        "layerperf: error: --model-seed applies to built-in models only: a model file is as it is"
