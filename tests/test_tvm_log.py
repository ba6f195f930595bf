"""TVM's own C++ log lines (written to stderr by TVM, with no run-time setting to stop them) are no raw
terminal lines: a build's warnings are the profile's, said once per message, from the cache too."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from layerperf.backends.tvm import cpp_log

RAW = (b"[16:56:08] /project/include/tvm/topi/transform.h:1261: Warning: Fast mode segfaults when there are "
       b"out-of-bounds indices. Make sure input indices are in bound\n")
SAID = "Fast mode segfaults when there are out-of-bounds indices. Make sure input indices are in bound"


@pytest.mark.parametrize("fails", ["tempfile", "dup2"])
def test_stderr_that_cannot_be_pointed_away_is_left_as_it_is(fails: str, monkeypatch: pytest.MonkeyPatch,
                                                              capfd: pytest.CaptureFixture[str]) -> None:
    """No temporary file, or a dup2 that fails: the body runs with stderr as it is (TVM's lines printed, none
    said), no descriptor is left open, and the body's own error carries no trace of the failure."""
    import tempfile

    real_dup2 = os.dup2

    def refuse(*_: object) -> None:
        raise OSError(28, "No space left on device")

    if fails == "tempfile":
        monkeypatch.setattr(tempfile, "TemporaryFile", refuse)
    else:
        def dup2(fd: int, fd2: int) -> None:  # cpp_log's pointing of stderr fails; pytest's own capture works
            if fd2 == 2 and sys._getframe(1).f_globals["__name__"] == cpp_log.__name__ \
                    and sys._getframe(1).f_code.co_name == "_pointed_away":
                refuse()
            real_dup2(fd, fd2)

        monkeypatch.setattr(os, "dup2", dup2)
    fds = len(os.listdir("/proc/self/fd"))
    with pytest.raises(ValueError) as err, cpp_log.captured() as said:
        os.write(2, RAW)
        raise ValueError("the compile failed")
    assert err.value.__context__ is None and said == []
    assert len(os.listdir("/proc/self/fd")) == fds
    assert capfd.readouterr().err == RAW.decode()


def test_tvm_warnings_are_taken_and_the_rest_of_stderr_kept(capfd: pytest.CaptureFixture[str]) -> None:
    with cpp_log.captured() as said:
        os.write(2, RAW)
        os.write(2, b"someone else's line\n")
        os.write(2, RAW)
        os.write(2, b"[16:56:09] /project/src/relax/x.cc:12: an info line\n")
        os.write(2, b"[16:56:09] /project/src/relax/y.cc:34: Error: an error line\n")
    assert said == [f"{SAID} (2 times)", "an error line"]
    assert capfd.readouterr().err == "someone else's line\n[16:56:09] /project/src/relax/x.cc:12: an info line\n"


def test_a_failed_compile_leaves_stderr_as_tvm_wrote_it(capfd: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(RuntimeError), cpp_log.captured() as said:
        os.write(2, RAW)
        raise RuntimeError("the compile failed")
    assert said == [] and capfd.readouterr().err == RAW.decode()


def _gather(path: Path) -> Path:
    """An embedding lookup: Gather over indices the model is fed, which TVM's topi.take compiles in its "fast"
    mode, warning of out-of-bounds indices on stderr."""
    table = numpy_helper.from_array(np.ones((100, 16), np.float32), "table")
    graph = helper.make_graph([helper.make_node("Gather", ["table", "ids"], ["e"], name="emb"),
                               helper.make_node("Relu", ["e"], ["y"], name="relu")], "g",
                              [helper.make_tensor_value_info("ids", TensorProto.INT64, [1, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8, 16])], [table])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=9), path)
    return path


def test_a_tvm_warning_is_a_profile_warning_compiled_or_cached(tmp_path: Path, capfd: pytest.CaptureFixture[str],
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("tvm")
    from layerperf.cli import main

    monkeypatch.setenv("LAYERPERF_CACHE", str(tmp_path / "cache"))  # compiled here, then read back
    monkeypatch.setenv("TVM_NUM_THREADS", "1")
    path = _gather(tmp_path / "gather.onnx")
    for _ in ("compiled", "cached"):
        assert main(["profile", str(path), "--backend", "tvm", "--runs", "2", "--warmup", "0", "--no-latency",
                     "--wide"]) == 0
        captured = capfd.readouterr()
        assert "transform.h" not in captured.err + captured.out and "] /" not in captured.err
        words = " ".join(captured.out.split())
        assert words.count(f"warning: TVM, compiling the model: {SAID}") == 1, captured.out
