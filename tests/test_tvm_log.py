"""TVM's own C++ log lines (written to stderr by TVM, with no run-time setting to stop them) are no raw
terminal lines: a build's warnings are the profile's, said once per message, from the cache too."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from layerperf.backends.tvm import cpp_log

RAW = (b"[16:56:08] /project/include/tvm/topi/transform.h:1261: Warning: Fast mode segfaults when there are "
       b"out-of-bounds indices. Make sure input indices are in bound\n")
SAID = "Fast mode segfaults when there are out-of-bounds indices. Make sure input indices are in bound"


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
