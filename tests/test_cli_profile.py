"""The `layerperf profile` command line: output, files, and every bad-input case."""

from __future__ import annotations

import json
import os
from pathlib import Path

import onnx
import pytest
from onnx import helper

from conftest import run_cli, tiny_cnn


def assert_clean_error(proc, *words: str) -> None:  # type: ignore[no-untyped-def]
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    assert lines[0].startswith("layerperf: error:")
    for word in words:
        assert word in lines[0], lines[0]


def test_profile_writes_trace_and_csv(tiny_model_path: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    proc = run_cli("profile", str(tiny_model_path), "--runs", "3", "--warmup", "1", "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    assert (out / "trace.json").exists() and (out / "layers.csv").exists()
    assert "self time" in proc.stdout and "cumulative" in proc.stdout and "in_shapes" in proc.stdout
    assert "one multiply-add = 2 FLOPs" in proc.stdout
    assert "profiler overhead" in proc.stdout
    assert not [p for p in out.iterdir() if p.name.startswith(".")]  # no temporaries left


def test_profile_json_output(tiny_model_path: Path) -> None:
    proc = run_cli("profile", str(tiny_model_path), "--runs", "2", "--warmup", "0", "--format", "json")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["summary"]["runs"] == 2
    assert {r["name"] for r in doc["layers"]} >= {"fc"}


def test_python_m_and_help() -> None:
    proc = run_cli("--help")
    assert proc.returncode == 0
    for cmd in ("profile", "models"):
        assert cmd in proc.stdout


# -- bad input: one clear line, exit 2, no traceback, nothing written ---------------------------------

@pytest.fixture()
def out_dir(tmp_path: Path) -> Path:
    return tmp_path / "out"


def bad(out_dir: Path, *args: str):  # type: ignore[no-untyped-def]
    proc = run_cli("profile", *args, "--runs", "1", "--warmup", "0", "--out", str(out_dir))
    assert not out_dir.exists() or not any(out_dir.iterdir()), "partial output written"
    return proc


def test_missing_file(out_dir: Path, tmp_path: Path) -> None:
    assert_clean_error(bad(out_dir, str(tmp_path / "nope.onnx")), "no such model file")


def test_not_onnx(out_dir: Path, tmp_path: Path) -> None:
    path = tmp_path / "text.onnx"
    path.write_text("this is not a protobuf at all, just some text\n" * 10)
    assert_clean_error(bad(out_dir, str(path)), "not an ONNX model")


def test_truncated_model(out_dir: Path, tmp_path: Path, tiny_model_path: Path) -> None:
    data = tiny_model_path.read_bytes()
    path = tmp_path / "truncated.onnx"
    path.write_bytes(data[: len(data) // 2])
    assert_clean_error(bad(out_dir, str(path)), str(path))


def test_empty_model(out_dir: Path, tmp_path: Path) -> None:
    path = tmp_path / "empty.onnx"
    path.write_bytes(b"")
    assert_clean_error(bad(out_dir, str(path)), "empty")


def test_checker_failure(out_dir: Path, tmp_path: Path) -> None:
    model = tiny_cnn()
    model.graph.node[1].input[0] = "does_not_exist"  # Relu reads a tensor nobody produces
    path = tmp_path / "broken.onnx"
    onnx.save(model, path)
    assert_clean_error(bad(out_dir, str(path)), "fails the ONNX checker")


def test_unknown_zoo_name(out_dir: Path) -> None:
    assert_clean_error(bad(out_dir, "resnet9000"), "unknown model", "resnet50")


def test_malformed_shape(out_dir: Path, dynamic_model_path: Path) -> None:
    assert_clean_error(bad(out_dir, str(dynamic_model_path), "--shape", "input=1x3xax16"), "malformed --shape")


def test_unknown_input_name(out_dir: Path, dynamic_model_path: Path) -> None:
    assert_clean_error(bad(out_dir, str(dynamic_model_path), "--shape", "pixels=1x3x16x16"),
                       "pixels", "input")


def test_wrong_rank_shape(out_dir: Path, dynamic_model_path: Path) -> None:
    assert_clean_error(bad(out_dir, str(dynamic_model_path), "--shape", "input=1x3"), "dims")


def test_bad_inputs_file(out_dir: Path, tiny_model_path: Path, tmp_path: Path) -> None:
    path = tmp_path / "in.npz"
    path.write_text("nope")
    assert_clean_error(bad(out_dir, str(tiny_model_path), "--inputs", str(path)), ".npz")


@pytest.mark.skipif(os.geteuid() == 0, reason="root can write anywhere; covered by the file-as-directory case")
def test_unwritable_out_readonly(tiny_model_path: Path, tmp_path: Path) -> None:
    ro = tmp_path / "ro"
    ro.mkdir(mode=0o500)
    proc = run_cli("profile", str(tiny_model_path), "--runs", "1", "--out", str(ro / "sub"))
    assert_clean_error(proc, "output directory")


def test_unwritable_out(tiny_model_path: Path, tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("a file where a directory should be")
    proc = run_cli("profile", str(tiny_model_path), "--runs", "1", "--warmup", "0", "--out", str(blocker / "out"))
    assert_clean_error(proc, "output directory")
    assert blocker.read_text() == "a file where a directory should be"


def test_model_ort_cannot_load(out_dir: Path, tmp_path: Path) -> None:
    # Valid for the checker, but the op has no kernel in ONNX Runtime for this domain.
    x = helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [2])
    y = helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [2])
    node = helper.make_node("NoSuchOp", ["x"], ["y"], domain="custom.layerperf")
    model = helper.make_model(helper.make_graph([node], "g", [x], [y]),
                              opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("custom.layerperf", 1)],
                              ir_version=9)
    path = tmp_path / "custom.onnx"
    onnx.save(model, path)
    assert_clean_error(bad(out_dir, str(path)), str(path))


@pytest.mark.parametrize("command", ["profile", "memory"])
def test_an_unwritable_out_is_refused_before_profiling(command: str, tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    import layerperf
    from layerperf.cli import main

    def never(*_: object, **__: object) -> None:
        raise AssertionError("profiled before the output directory was checked")

    monkeypatch.setattr(layerperf, "profile", never)
    blocker = tmp_path / "afile"
    blocker.write_text("")
    for out in (blocker, blocker / "sub"):
        assert main([command, "resnet18", "--runs", "1", "--out", str(out)]) == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == ["afile"]  # nothing created


@pytest.mark.parametrize("argv", [["profile", "m.onnx", "--threads", "-1"], ["diff", "a", "b", "--by", "foo"],
                                  ["calibrate", "--format", "yaml"], ["nosuch"]])
def test_a_bad_flag_is_one_line(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    from layerperf.cli import main

    with pytest.raises(SystemExit) as exc:
        main(argv)
    err = capsys.readouterr().err
    assert exc.value.code == 2 and err.count("\n") == 1 and "error: argument" in err and "--help" in err
