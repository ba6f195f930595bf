"""``--target`` for TVM: every form users know parsed to TVM 0.27's JSON dict; targets that cannot run
here refused in one line; the backend's availability without TVM."""

from __future__ import annotations

import importlib

import pytest

from layerperf.backends.tvm import runtime
from layerperf.backends.tvm.target import host_arch_matches, parse_cli, parse_target, resolve_host_cpu
from layerperf.errors import InputError, MissingDependency


@pytest.mark.parametrize(("text", "config"), [
    ("llvm", {"kind": "llvm"}),
    ("cuda", {"kind": "cuda"}),
    ("llvm -mcpu=znver4", {"kind": "llvm", "mcpu": "znver4"}),
    ("llvm -mcpu=skylake -mattr=+avx2,+fma -num-cores 4",
     {"kind": "llvm", "mcpu": "skylake", "mattr": ["+avx2", "+fma"], "num-cores": 4}),
    ("cuda -arch=sm_90 -max_num_threads=1024", {"kind": "cuda", "arch": "sm_90", "max_num_threads": 1024}),
    ("llvm -fast-math", {"kind": "llvm", "fast-math": True}),
    ('{"kind": "llvm", "mcpu": "znver4"}', {"kind": "llvm", "mcpu": "znver4"}),
])
def test_every_form_becomes_a_json_dict(text: str, config: dict) -> None:
    spec = parse_target(text)
    assert spec.config == config and spec.text == text and spec.kind == config["kind"]


def test_a_tag_is_kept_for_tvm_to_expand() -> None:
    spec = parse_target("nvidia/geforce-rtx-4090")
    assert spec.config == "nvidia/geforce-rtx-4090" and spec.kind == "cuda"


def test_keys_are_canonical() -> None:
    assert parse_target("llvm -mcpu=a -num-cores=2").key() == parse_target('{"num-cores": 2, "kind": "llvm", '
                                                                           '"mcpu": "a"}').key()


@pytest.mark.parametrize("text", ["", "   ", "-mcpu=znver4", "llvm mcpu=x", '{"mcpu": "x"}', "{not json",
                                  "llvm -mcpu='unclosed"])
def test_malformed_targets_are_one_line_input_errors(text: str) -> None:
    with pytest.raises(InputError) as info:
        parse_target(text)
    assert "\n" not in str(info.value)


def test_native_and_bare_llvm_mean_this_cpu() -> None:
    assert resolve_host_cpu(parse_target("llvm"), "znver4").config == {"kind": "llvm", "mcpu": "znver4"}
    assert resolve_host_cpu(parse_target("llvm -mcpu=native"), "znver4").config["mcpu"] == "znver4"
    kept = parse_target("llvm -mcpu=skylake")
    assert resolve_host_cpu(kept, "znver4") == kept
    cross = parse_target("llvm -mtriple=aarch64-linux-gnu")
    assert resolve_host_cpu(cross, "znver4") == cross


def test_host_architecture() -> None:
    assert host_arch_matches("x86_64-pc-linux-gnu", "x86_64")
    assert host_arch_matches("aarch64-linux-gnu", "arm64")
    assert not host_arch_matches("aarch64-linux-gnu", "x86_64")


def test_parse_cli_takes_space_separated_values() -> None:
    assert parse_cli("llvm -num-cores 8 -mcpu znver4") == {"kind": "llvm", "num-cores": 8, "mcpu": "znver4"}


def test_without_tvm_availability_says_how_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    real = importlib.import_module

    def no_tvm(name: str, *args: object) -> object:
        if name == "tvm":
            raise ImportError("No module named 'tvm'")
        return real(name, *args)

    monkeypatch.setattr(importlib, "import_module", no_tvm)
    got = runtime.availability()
    assert not got.usable and "pip install" in (got.reason or "") and "layerperf[tvm]" in (got.reason or "")
    with pytest.raises(MissingDependency, match="apache-tvm"):
        runtime.require_tvm()


def test_the_ffi_that_segfaults_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("tvm")
    monkeypatch.setattr(runtime, "versions", lambda: {"tvm": "0.27.0.post1", "tvm_ffi": "0.1.15.post2"})
    got = runtime.availability()
    assert got.usable and "segfaults" in (got.reason or "") and runtime.FFI_VERSION in (got.reason or "")


def test_runnable_targets_here() -> None:
    pytest.importorskip("tvm")
    from layerperf.backends.tvm.device import host_cpu, runnable_target

    spec, target = runnable_target("llvm")
    assert target.kind.name == "llvm" and spec.config["mcpu"] == host_cpu()
    spec, target = runnable_target("llvm -mcpu=native -num-cores=2")
    assert int(target.attrs["num-cores"]) == 2


@pytest.mark.parametrize(("text", "words"), [
    ("llvm -mtriple=aarch64-linux-gnu", "cannot run"),
    ("bogus", "TVM refuses"),
    ('{"kind": "llvm", "no-such-option": 1}', "TVM refuses"),
])
def test_targets_not_available_here_are_one_line_errors(text: str, words: str) -> None:
    pytest.importorskip("tvm")
    from layerperf.backends.tvm.device import runnable_target

    with pytest.raises(InputError) as info:
        runnable_target(text)
    assert words in str(info.value) and "\n" not in str(info.value)


def test_cuda_without_a_gpu_is_refused_in_one_line() -> None:
    tvm = pytest.importorskip("tvm")
    from layerperf.backends.tvm.device import runnable_target

    if tvm.runtime.enabled("cuda") and tvm.cuda(0).exist:
        pytest.skip("a CUDA device is here")
    with pytest.raises(InputError, match="not available here: no cuda device") as info:
        runnable_target("cuda")
    assert "\n" not in str(info.value)
