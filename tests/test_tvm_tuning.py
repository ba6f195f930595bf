"""MetaSchedule tuning kept per model and target: an interrupted tuning keeps its records and a rerun
tunes only the rest; a tuned build applies them, and each kernel's chosen schedule is read back as a
typed record (untuned kernels: the default schedule). Two small tasks, a few random-search trials."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

pytest.importorskip("tvm")
for _needed in ("psutil", "cloudpickle", "xgboost"):
    pytest.importorskip(_needed)
os.environ.setdefault("TVM_NUM_THREADS", "1")

import numpy as np  # noqa: E402
import onnx  # noqa: E402

from layerperf.backends.tvm import tuning  # noqa: E402
from layerperf.backends.tvm.build import Build, build  # noqa: E402
from layerperf.backends.tvm.cache import model_digest  # noqa: E402
from layerperf.backends.tvm.database import kernel_schedules  # noqa: E402
from layerperf.backends.tvm.device import runnable_target  # noqa: E402
from layerperf.backends.tvm.importer import import_onnx  # noqa: E402
from layerperf.backends.tvm.instrument import Runner  # noqa: E402
from layerperf.backends.tvm.pipeline import tunable_module  # noqa: E402
from tvm_models import feed, two_matmuls  # noqa: E402

TARGET = "llvm -num-cores=1"
QUICK = tuning.Search("replay-trace", timeout_s=300)
PER_TASK = 2


@pytest.fixture(scope="module")
def model() -> onnx.ModelProto:
    return two_matmuls()


@pytest.fixture(scope="module")
def tunable(model: onnx.ModelProto) -> tuple[object, object]:
    _, target = runnable_target(TARGET)
    return tunable_module(import_onnx(model).mod, target), target


@pytest.fixture(scope="module")
def session(tmp_path_factory: pytest.TempPathFactory, model: onnx.ModelProto, tunable: tuple) -> dict:
    """One interrupted tuning, then two reruns, in the model's own database folder."""
    mod, target = tunable
    spec, _ = runnable_target(TARGET)
    work_dir = tuning.database_dir(model_digest(model.SerializeToString()), spec.key(), "default",
                                   tmp_path_factory.mktemp("cache"))
    out: dict = {"work_dir": work_dir}
    with pytest.raises(tuning.TuningInterrupted) as info:
        tuning.tune(mod, target, work_dir, PER_TASK, search=QUICK, stop_after=1)
    out["interrupted"] = str(info.value)
    out["records_after_interrupt"] = len(tuning.ms.database.JSONDatabase(work_dir=str(work_dir)))
    out["rerun"] = tuning.tune(mod, target, work_dir, PER_TASK, search=QUICK)
    out["third"] = tuning.tune(mod, target, work_dir, PER_TASK, search=QUICK)
    return out


def test_two_tasks_are_found(tunable: tuple) -> None:
    mod, target = tunable
    names = sorted(t.task_name for t in tuning.extract(mod, target))
    assert names == ["fused_matmul_relu", "matmul1"]


def test_an_interrupted_tuning_keeps_its_records(session: dict) -> None:
    assert "interrupted" in session["interrupted"] and "kept in" in session["interrupted"]
    assert "\n" not in session["interrupted"]
    assert session["records_after_interrupt"] >= 1


def test_a_rerun_tunes_only_what_is_missing(session: dict) -> None:
    rerun, third = session["rerun"], session["third"]
    assert rerun.tasks == 2 and len(rerun.tuned) == 1 and len(rerun.skipped) == 1
    assert rerun.trials_run >= 1 and rerun.records >= 2 * PER_TASK
    assert third.tuned == () and set(third.skipped) == {"fused_matmul_relu", "matmul1"} and third.trials_run == 0


def test_progress_is_reported(tunable: tuple, tmp_path: Path) -> None:
    mod, target = tunable
    seen: list[tuple[int, int]] = []
    result = tuning.tune(mod, target, tmp_path, 1, only=["matmul1"], search=QUICK,
                         progress=lambda what, done, total: seen.append((done, total)))
    assert result.tuned == ("matmul1",) and seen and seen[-1] == (1, 1)


def test_a_tuning_leaves_no_thread_behind(tunable: tuple, tmp_path: Path) -> None:
    # a builder's worker pool kept its thread (a reference cycle) until some later collection: this process
    # then read a big trace in one process, not two (parallel.worth_it), and the two-process tests failed
    import threading

    mod, target = tunable
    before = {t.ident for t in threading.enumerate()}
    tuning.tune(mod, target, tmp_path / "done", 1, only=["matmul1"], search=QUICK)
    with pytest.raises(tuning.TuningInterrupted) as info:  # an interrupted one left it, held by its error
        tuning.tune(mod, target, tmp_path / "cut", PER_TASK, search=QUICK, stop_after=1)
    assert [t.name for t in threading.enumerate() if t.ident not in before] == [] and info.value.__context__ is None


def test_a_tuned_build_applies_the_records_and_says_so(session: dict, model: onnx.ModelProto) -> None:
    tuned = build(model, target=TARGET, database_dir=session["work_dir"], use_cache=False)
    plain = build(model, target=TARGET, use_cache=False)
    assert tuned.tuned and not plain.tuned
    assert tuned.info.schedule.startswith("metaschedule") and plain.info.schedule == "default schedule"
    assert [s.nodes for s in tuned.cmap.kernels()] == [s.nodes for s in plain.cmap.kernels()]
    np.testing.assert_allclose(_run(tuned, model), _run(plain, model), rtol=1e-4, atol=1e-4)


def _run(b: Build, model: onnx.ModelProto) -> np.ndarray:
    return Runner(b.executable, b.device, [feed(model)["x"]], b.cmap).plain().numpy()


def test_each_kernels_schedule_is_read_from_the_database(session: dict, tunable: tuple) -> None:
    mod, target = tunable
    names = ["fused_matmul_relu", "matmul1"]
    tuned = kernel_schedules(session["work_dir"], target, mod, names)
    for name in names:
        s = tuned[name]
        assert s.source == "metaschedule" and s.func == name and s.trace and s.run_s and s.run_s > 0
        assert s.tiles and all(t.block == "matmul" and t.loop in ("i0", "i1", "k") for t in s.tiles)
        assert s.loop_order and s.max_vectorize_extent == 64
        assert any(lp.kind == "parallel" for lp in s.loops) or s.parallel_extent is None
    untuned = kernel_schedules(None, target, mod, names)
    assert all(s.source == "default schedule" and not s.tiles for s in untuned.values())


def test_tuning_needs_a_trial(tunable: tuple, tmp_path: Path) -> None:
    mod, target = tunable
    with pytest.raises(tuning.BackendError, match="at least 1 trial"):
        tuning.tune(mod, target, tmp_path, 0)


def test_a_ctrl_c_stops_at_the_next_batch_and_keeps_what_was_measured(tunable: tuple, tmp_path: Path) -> None:
    import signal

    mod, target = tunable
    before = signal.getsignal(signal.SIGINT)
    sent: list[int] = []

    def progress(what: str, done: int, total: int) -> None:  # a Ctrl-C while the first batch is counted
        if not sent:
            sent.append(done)
            os.kill(os.getpid(), signal.SIGINT)

    with pytest.raises(tuning.TuningInterrupted, match="records found are kept"):
        tuning.tune(mod, target, tmp_path, 4, search=QUICK, progress=progress)
    assert len(tuning.ms.database.JSONDatabase(work_dir=str(tmp_path))) >= sent[0] >= 1
    assert signal.getsignal(signal.SIGINT) is before
