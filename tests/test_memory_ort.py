"""The memory profiler on ONNX Runtime: hand-built graphs checked against its own arena, zoo models,
resident-memory sampling, the pictures, trace.json, the command line and bad input."""

from __future__ import annotations

import json
import mmap
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import layerperf
from layerperf.analysis.memory.report import memory_report
from layerperf.api import profile_memory
from layerperf.collectors.rss_sampler import RssSampler
from layerperf.data.memory_report import MemoryReport
from layerperf.errors import InputError

from conftest import run_cli

MIB = 1 << 20


def matmul_graph(nodes: list[tuple[str, str, str, int, int] | onnx.NodeProto]) -> onnx.ModelProto:
    """float32 [1, n] tensors from x [1, 64] to y [1, 128]: a tuple (name, input, output, n_in, n_out) is a
    MatMul by a weight of its own, a NodeProto is taken as it is."""
    rng = np.random.default_rng(0)
    inits, graph_nodes = [], []
    for spec in nodes:
        if isinstance(spec, onnx.NodeProto):
            graph_nodes.append(spec)
            continue
        name, src, dst, n_in, n_out = spec
        w = numpy_helper.from_array(rng.standard_normal((n_in, n_out)).astype(np.float32), f"{name}.w")
        inits.append(w)
        graph_nodes.append(helper.make_node("MatMul", [src, w.name], [dst], name=name))
    graph = helper.make_graph(graph_nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 64])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 128])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=9)


def branch_model() -> onnx.ModelProto:
    # a feeds two branches (B, C) that meet in F; sizes are multiples of the arena's 256-byte rounding.
    return matmul_graph([("A", "x", "a", 64, 256), ("B", "a", "b", 256, 512), ("C", "a", "c", 256, 1024),
                         ("D", "b", "d", 512, 128), ("E", "c", "e", 1024, 128),
                         helper.make_node("Add", ["d", "e"], ["y"], name="F")])


def inplace_model() -> onnx.ModelProto:
    # Relu and Sigmoid may write over their dying input; the MatMuls may not.
    return matmul_graph([("A", "x", "a", 64, 256), helper.make_node("Relu", ["a"], ["r"], name="R"),
                         helper.make_node("Sigmoid", ["r"], ["s"], name="S"), ("D", "s", "y", 256, 128)])


def arena_growth_minus_inputs(rep: MemoryReport, run: int = 0) -> list[int]:
    """ONNX Runtime's own arena in use above its start, node by node, in the first run of a fresh session,
    next to our live bytes less the caller-owned graph inputs (the arena does not hold those)."""
    assert rep.runtime is not None and rep.runtime.arena_in_use_before_bytes is not None
    cold = rep.runtime.arena_runs[run]
    base = rep.runtime.arena_in_use_before_bytes
    return [cold.in_use_bytes[k] - base for k in range(len(rep.nodes))]  # type: ignore[operator]


def live_minus_inputs(rep: MemoryReport) -> list[int]:
    return [n.live_bytes - sum(b.nbytes for b in rep.blocks if b.kind == "input" and b.live_at(k))
            for k, n in enumerate(rep.nodes)]


def test_branches_exact_and_equal_to_onnxruntimes_arena() -> None:
    prof = profile_memory(branch_model(), opt_level="disable", runs=2, sample_rate=0)
    rep = memory_report(prof)
    assert [n.name for n in rep.nodes] == ["A", "C", "E", "B", "D", "F"]  # ONNX Runtime's order: depth first
    x, a, b, c, d, e, y = (n * 4 for n in (64, 256, 512, 1024, 128, 128, 128))  # float32 bytes
    # a lives until B, its last consumer, so it is still held while the C-E branch runs.
    assert [n.live_bytes for n in rep.nodes] == [x + a, a + c, a + c + e, a + e + b, e + b + d, e + d + y]
    assert (rep.peak_bytes, rep.peak_node, rep.peak_index) == (a + c + e, "E", 2)
    assert [t["name"] for t in rep.peak_entries()] == ["c", "a", "e"]
    assert rep.simulated_arena_bytes == rep.peak_bytes  # 64-byte multiples pack without a gap here
    assert arena_growth_minus_inputs(rep) == live_minus_inputs(rep)


def test_inplace_ops_share_a_buffer_as_in_onnxruntime() -> None:
    rep = memory_report(profile_memory(inplace_model(), opt_level="disable", runs=2, sample_rate=0))
    assert [n.name for n in rep.nodes] == ["A", "R", "S", "D"]
    assert any(set(b.tensors) == {"a", "r", "s"} for b in rep.blocks)
    assert [n.live_bytes for n in rep.nodes] == [256 + 1024, 1024, 1024, 1024 + 512]
    assert arena_growth_minus_inputs(rep) == live_minus_inputs(rep)


@pytest.fixture(scope="module")
def resnet(tmp_path_factory: pytest.TempPathFactory) -> tuple[layerperf.Profile, dict[str, Path]]:
    prof = profile_memory("resnet18", image_size=64, runs=2, sample_rate=1)
    return prof, layerperf.save(prof, tmp_path_factory.mktemp("resnet") / "out")


def test_zoo_peak_between_largest_tensor_and_sum(resnet: tuple[layerperf.Profile, dict[str, Path]]) -> None:
    prof, _ = resnet
    rep = memory_report(prof)
    sizes = [t.nbytes or 0 for layer in prof.layers for t in layer.outputs]
    assert max(sizes) <= rep.peak_bytes <= sum(sizes) + sum(b.nbytes for b in rep.blocks if b.kind == "input")
    assert rep.peak_bytes <= rep.simulated_arena_bytes <= 2 * rep.peak_bytes
    assert rep.nodes[rep.peak_index].live_bytes == rep.peak_bytes == max(n.live_bytes for n in rep.nodes)
    assert rep.initializer_bytes > 40 * MIB  # resnet18's 11.7M float32 weights, counted apart
    assert rep.max_allocated_bytes is not None and rep.max_allocated_bytes >= rep.peak_bytes
    assert rep.max_allocated_source == "arena growth"
    assert sum(n.param_bytes for n in rep.nodes) > 40 * MIB
    assert all(n.arena.get("mem_arena_held", 0) > 0 for n in rep.nodes)


@pytest.mark.parametrize("name", ["mobilenet_v2", "lstm"])
def test_more_zoo_models_within_bounds(name: str) -> None:
    prof = profile_memory(name, image_size=64, seq_len=16, runs=1, sample_rate=0)
    rep = memory_report(prof)
    outputs = [t.nbytes or 0 for layer in prof.layers for t in layer.outputs]
    inputs = sum(b.nbytes for b in rep.blocks if b.kind == "input")
    assert max(outputs) <= rep.peak_bytes <= sum(outputs) + inputs
    assert rep.peak_bytes <= rep.simulated_arena_bytes and not rep.warnings


def test_zoo_sampled_rss_one_per_node_per_run(resnet: tuple[layerperf.Profile, dict[str, Path]]) -> None:
    prof, _ = resnet
    rt = memory_report(prof).runtime
    assert rt is not None and rt.sample_rate == 1 and rt.rss_baseline_bytes and rt.rss_hwm_bytes
    n = len(prof.layers)
    for run in (0, 1):
        samples = [s for s in rt.rss_samples if s.run == run]
        assert [s.node for s in samples] == list(range(n))
        assert all(b.t_ns >= a.t_ns for a, b in zip(samples, samples[1:], strict=False))
    marks = [s.hwm_bytes for s in rt.rss_samples]
    assert marks == sorted(marks) and all(s.hwm_bytes >= s.rss_bytes for s in rt.rss_samples)
    assert rt.rss_baseline_bytes <= marks[0] and marks[-1] <= rt.rss_hwm_bytes


def test_sample_rate_keeps_every_nth_node(tiny_model_path: Path) -> None:
    prof = profile_memory(tiny_model_path, opt_level="disable", runs=1, sample_rate=2)
    rt = memory_report(prof).runtime
    assert rt is not None
    assert [(s.run, s.node) for s in rt.rss_samples] == [(r, k) for r in (0, 1) for k in (0, 2, 4)]
    off = memory_report(profile_memory(tiny_model_path, runs=1, sample_rate=0)).runtime
    assert off is not None and off.rss_samples == () and off.rss_hwm_bytes is None
    assert off.arena_runs  # the arena figures do not need sampling


def test_rss_sampler_sees_memory_being_touched() -> None:
    with RssSampler() as sampler:
        time.sleep(0.01)
        # A fresh anonymous mapping, so the pages are new to the process whatever the allocator
        # kept from earlier tests; writing every byte makes them resident.
        block = mmap.mmap(-1, 64 * MIB)
        np.frombuffer(block, dtype=np.uint8)[:] = 1
        # held until the sampler thread has had its turn: on a loaded host it may wait longer than
        # any fixed sleep to be scheduled (bounded: a sampler that never sees it fails below)
        deadline = time.monotonic() + 5
        while sampler.hwm_bytes - sampler.baseline_bytes < 60 * MIB and time.monotonic() < deadline:
            time.sleep(0.005)
        time.sleep(0.02)
        block.close()
        time.sleep(0.01)
    assert sampler.hwm_bytes - sampler.baseline_bytes >= 60 * MIB
    times = sampler.times_ns
    assert times.size > 10 and np.all(np.diff(times) >= 0)
    assert sampler.rss_bytes.max() <= sampler.hwm_bytes


def test_rss_sampler_thins_out_when_full() -> None:
    with RssSampler(capacity=8) as sampler:
        time.sleep(0.02)
    times = sampler.times_ns
    assert 4 <= times.size <= 8 and np.all(np.diff(times) > 0)
    assert sampler.hwm_bytes >= sampler.rss_bytes.max()


def test_pictures_and_counter_track(resnet: tuple[layerperf.Profile, dict[str, Path]]) -> None:
    prof, written = resnet
    assert {"memory_flow.svg", "memory_timeline.svg", "trace.json", "layers.csv"} <= set(written)
    rep = memory_report(prof)
    flow = ET.parse(written["memory_flow.svg"]).getroot()
    titles = [el.text or "" for el in flow.iter("{http://www.w3.org/2000/svg}title")]
    assert sum(1 for b in rep.blocks if b.nbytes) == sum(1 for tt in titles if "produced by" in tt or
                                                         "graph input" in tt)
    peak_block = rep.tensors_at_peak()[0]
    assert any(tt.startswith(peak_block.name) and rep.nodes[peak_block.first].name in tt for tt in titles)
    timeline = ET.parse(written["memory_timeline.svg"]).getroot()
    columns = [el.text or "" for el in timeline.iter("{http://www.w3.org/2000/svg}title") if "live" in (el.text or "")]
    assert len(columns) == len(rep.nodes)
    trace = json.loads(written["trace.json"].read_text())
    live = [e for e in trace["traceEvents"] if e["ph"] == "C" and e["name"] == "live tensor bytes"]
    assert [e["args"]["bytes"] for e in live] == [n.live_bytes for n in rep.nodes]
    assert [e["ts"] for e in live] == sorted(e["ts"] for e in live)
    assert any(e["ph"] == "C" and e["name"] == "resident bytes (first run)" for e in trace["traceEvents"])
    assert memory_report(layerperf.load(written["trace.json"])) == rep  # the report round-trips with the trace


def test_svg_escapes_names(resnet: tuple[layerperf.Profile, dict[str, Path]]) -> None:
    from dataclasses import replace

    from layerperf.renderers import svg

    rep = memory_report(resnet[0])
    odd = 'a<b>&"c\'\x01'
    rep = replace(rep, nodes=(replace(rep.nodes[0], name=odd, op_type="<op>"), *rep.nodes[1:]))
    for picture in (svg.flow_svg(rep, odd), svg.memory_timeline_svg(rep, odd)):
        root = ET.fromstring(picture)
        texts = [el.text or "" for el in root.iter()]
        assert any('a<b>&"c\'' in tt for tt in texts)


def test_profile_api_options(tiny_model_path: Path) -> None:
    plain = layerperf.profile(tiny_model_path, runs=1, warmup=0, latency=False)
    assert "memory" not in plain.extra
    with pytest.raises(InputError, match="sample rate"):
        layerperf.profile(tiny_model_path, runs=1, sample_rate=2)
    with pytest.raises(InputError, match="sample-rate"):
        layerperf.profile(tiny_model_path, runs=1, memory=True, sample_rate=-1)


# -- command line ------------------------------------------------------------------------------------

def test_cli_memory_json(tiny_model_path: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    proc = run_cli("memory", str(tiny_model_path), "--out", str(out), "--format", "json", "--sample-rate", "0")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["peak_bytes"] > 0 and doc["peak_node"] and doc["max_allocated_bytes"] is not None
    assert doc["tensors_at_peak"][0]["bytes"] <= doc["peak_bytes"]
    assert {Path(p).name for p in doc["files"].values()} >= {"memory_flow.svg", "memory_timeline.svg"}
    assert all(Path(p).exists() for p in doc["files"].values())


def test_cli_profile_memory_table(tiny_model_path: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    proc = run_cli("profile", str(tiny_model_path), "--runs", "2", "--warmup", "1", "--memory", "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    assert "peak live tensors" in proc.stdout and "max allocated" in proc.stdout
    assert "tensors alive at the peak" in proc.stdout
    assert (out / "memory_flow.svg").exists() and (out / "memory_timeline.svg").exists()


@pytest.mark.parametrize("args, words", [
    (["memory", "{missing}"], ["no such model file"]),
    (["memory", "resnet9000"], ["unknown model"]),
    (["profile", "{tiny}", "--sample-rate", "3"], ["sample rate", "--memory"]),
])
def test_cli_bad_input(args: list[str], words: list[str], tiny_model_path: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    args = [a.format(missing=tmp_path / "nope.onnx", tiny=tiny_model_path) for a in args]
    proc = run_cli(*args, "--runs", "1", "--out", str(out))
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("layerperf: error:") and "Traceback" not in proc.stderr
    assert all(w in lines[0] for w in words), lines[0]
    assert not out.exists()
