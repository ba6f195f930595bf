"""The typed record schema: the Profile's metadata (built by every backend, saved with the keys trace.json
has always had, loaded back equal, older traces with defaults), the per-layer extension of a runtime's own
figures, how a layer's work nests (totals and rates), and the flat per-layer records a dataset stores."""

from __future__ import annotations

import dataclasses
import re
import types
import typing
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pytest

import layerperf
from layerperf.data.codec import layer_from_json, layer_to_json
from layerperf.data.extension import CudaModuleMemory, OrtNodeMemory
from layerperf.data.machine import Machine
from layerperf.data.metadata import BackendOptions, Metadata, ModelInfo, PlanInfo, split_options
from layerperf.data.profile import CostNesting, Layer, Profile, Run, Span
from layerperf.data.records import LayerRecord
from layerperf.data.tensor import TensorInfo

DATA = Path(__file__).parent / "data" / "traces_0_1"
README = Path(__file__).parent.parent / "README.md"
US = 1000


def _saved_metadata(trace: Path) -> dict[str, Any]:
    return orjson.loads(trace.read_bytes())["otherData"]["layerperf"]["metadata"]


# -- metadata -----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["resnet18_counters_memory", "loop"])
def test_an_old_trace_loads_typed_and_saves_its_metadata_as_it_was(name: str, tmp_path: Path) -> None:
    trace = DATA / name / "trace.json"
    meta = layerperf.load(trace).metadata
    assert meta.backend == "onnxruntime" and meta.layerperf_version == "0.1.0" and meta.pid
    assert meta.plan == PlanInfo(warmup=1, runs=3, threads=0, seed=0, shapes=(), inputs_file=None, latency=True,
                                 keys=("warmup", "runs", "threads", "seed", "shapes", "inputs_file", "latency"))
    assert meta.options.as_dict() == {"opt_level": "all", "provider": "CPUExecutionProvider", "max_events": 1_000_000}
    assert meta.machine == Machine("AMD EPYC", 2, 2, 25276514304, "6.18.44-fc-v595", "Linux", "x86_64", "3.11.7")
    assert meta.to_json() == _saved_metadata(trace)  # every key and value, null inputs_file included
    layerperf.save(layerperf.load(trace), tmp_path)
    assert _saved_metadata(tmp_path / "trace.json") == _saved_metadata(trace)


def test_a_zoo_models_options_come_back() -> None:
    meta = layerperf.load(DATA / "resnet18_counters_memory").metadata
    assert meta.model == ModelInfo("resnet18", "/root/.cache/layerperf/zoo/resnet18_b1_32px_seed0_v1.onnx",
                                   "c3253abd93e795922916126cf0375b09bd51b3ff78e9f38ca489f1d3bf90e3e8", True,
                                   {"image_size": 32})


def test_what_a_trace_lacks_loads_as_none_and_what_it_adds_is_kept() -> None:
    meta = Metadata.from_json({"model": {"name": "m"}, "future_field": {"x": 1}})
    assert meta == Metadata(model=ModelInfo("m"), other={"future_field": {"x": 1}})
    assert meta.machine is None and meta.plan.threads is None and meta.threads is None and meta.pid is None
    assert meta.to_json()["future_field"] == {"x": 1}
    assert Metadata.from_json({}).model.name == "model"
    assert Metadata.from_json(meta.to_json()) == meta


def test_options_split_into_the_plan_and_the_backends_own() -> None:
    plan, own = split_options("torch", {"warmup": 2, "level": 2, "shapes": ["x=1x3"], "events": ["cycles"]})
    assert plan == PlanInfo(warmup=2, shapes=("x=1x3",), keys=("warmup", "shapes"))
    assert own == BackendOptions("torch", (("level", 2), ("events", ("cycles",))))
    assert own.text() == "level=2;events=cycles" and own.as_dict() == {"level": 2, "events": ["cycles"]}

    @dataclasses.dataclass(frozen=True)
    class Opts:
        level: int = 1
        device: str = "cpu"

    assert own.to(Opts) == Opts(level=2) and BackendOptions.of("torch", Opts(3)).get("device") == "cpu"


def test_a_profile_saves_and_loads_equal(tmp_path: Path, tiny_model_path: Path) -> None:
    prof = layerperf.profile(str(tiny_model_path), runs=2, warmup=0, latency=False, threads=1, shapes=())
    layerperf.save(prof, tmp_path)
    again = layerperf.load(tmp_path)
    assert again.metadata == prof.metadata and again == prof
    assert again.metadata.plan.threads == 1 and again.metadata.threads == 1 and again.metadata.plan.latency is False


def test_the_in_code_torch_api_records_its_own_options() -> None:
    torch = pytest.importorskip("torch")
    import layerperf.torch as lt

    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU())
    with lt.Profiler(warmup=0) as p:
        model(torch.ones(1, 4))
        model(torch.ones(1, 4))
    meta = p.profile.metadata
    assert isinstance(meta, Metadata) and meta.backend == "torch" and meta.provider == "cpu"
    assert meta.plan.keys == ("warmup",) and meta.plan.warmup == 0
    assert set(meta.to_json()["options"]) == {"warmup", "level", "in_situ", "profile_device", "events", "memory",
                                              "sample_rate"}
    assert meta.model.name == "Sequential" and meta.machine is not None


# -- a runtime's own figures ---------------------------------------------------------------------------------
def test_a_layers_runtime_figures_are_typed_and_saved_under_memory() -> None:
    prof = layerperf.load(DATA / "resnet18_counters_memory")
    ext = prof.layers[0].extension
    assert isinstance(ext, OrtNodeMemory) and ext.mem_arena_held is not None
    assert layer_to_json(prof.layers[0])["memory"] == ext.figures() == prof.layers[0].memory_figures
    cuda = Layer("conv", "Conv2d", extension=CudaModuleMemory(10, 1050, 50))
    saved = layer_to_json(cuda)
    assert saved["memory"] == {"cuda_allocated_delta_bytes": 10, "cuda_peak_allocated_bytes": 1050,
                               "cuda_peak_rise_bytes": 50}
    assert "padded_flops" in saved and layer_from_json(saved) == cuda
    assert layer_from_json({**saved, "memory": {}}).extension is None


# -- how work nests ---------------------------------------------------------------------------------------------
def _nested(nesting: CostNesting) -> Profile:
    """A parent of 100 µs whole, 40 of them its own, around a child of 60 µs; 1 MFLOP each."""
    layers = [Layer("block", "Block", flops=1_000_000), Layer("block.fc", "Linear", flops=1_000_000, parent="block")]
    runs = [Run(0, 100 * US, [Span(0, 0, 100 * US, 1), Span(1, 20 * US, 60 * US, 1)])]
    return Profile(metadata=Metadata(), layers=layers, runs=runs, cost_nesting=nesting)


def test_a_layers_rate_is_over_the_time_its_work_was_done_in() -> None:
    own = {r["name"]: r for r in _nested(CostNesting.SELF).table()}
    assert own["block"]["median_us"] == 40 and own["block"]["flops_per_s"] == pytest.approx(1e6 / 40e-6)
    whole = {r["name"]: r for r in _nested(CostNesting.INCLUSIVE).table()}
    assert whole["block"]["flops_per_s"] == pytest.approx(1e6 / 100e-6)
    assert _nested(CostNesting.SELF).in_totals() == [True, True]
    assert _nested(CostNesting.INCLUSIVE).in_totals() == [False, True]
    assert _nested(CostNesting.SELF).calls().meta["inclusive_flops"] is False
    assert _nested(CostNesting.INCLUSIVE).calls().meta["inclusive_flops"] is True


# -- per-layer records ------------------------------------------------------------------------------------------
def _allowed(annotation: Any) -> set[type]:
    hint = typing.get_type_hints(LayerRecord)[annotation]
    args = typing.get_args(hint) if isinstance(hint, types.UnionType) else (hint,)
    return {type(None) if a is type(None) else a for a in args}


def test_records_are_flat_typed_and_equal_the_tables_figures() -> None:
    prof = layerperf.load(DATA / "resnet18_counters_memory")
    records, rows = prof.records(), prof.table()
    assert len(records) == len(prof.layers) and [r.layer_index for r in records] == list(range(len(records)))
    for rec, row in zip(records, rows, strict=True):
        for field in dataclasses.fields(LayerRecord):
            value = getattr(rec, field.name)
            assert type(value) in _allowed(field.name), (field.name, value)
            assert not (isinstance(value, float) and np.isnan(value)), field.name
            if field.name in row:
                assert value == row[field.name], (rec.name, field.name)
        counts = dict(item.split("=") for item in rec.counters.split(";"))
        assert {k: float(v) for k, v in counts.items()} == {k: row[k] for k in counts}
    first = records[0]
    assert (first.backend, first.model_name, first.machine_cpu, first.threads) == (
        "onnxruntime", "resnet18", "AMD EPYC", prof.measurement.intra_op_threads if prof.measurement else None)
    assert first.options == "opt_level=all;provider=CPUExecutionProvider;max_events=1000000"
    assert first.stepwise_median_us == pytest.approx(prof.counters.stepwise_median_ns[0] / 1e3)  # type: ignore[union-attr]
    assert first.stddev_us == pytest.approx(float(np.std(prof.durations_ns(0), ddof=1)) / 1e3)


def test_a_record_of_a_layer_that_never_ran_has_no_times() -> None:
    layers = [Layer("a", "Relu", inputs=(TensorInfo("x", (1, 3, 224, 224), "float32"),
                                         TensorInfo("w", (64, 3, 7, 7), "float32")))]
    (rec,) = Profile(metadata=Metadata(), layers=layers, runs=[]).records()
    assert rec.calls == 0 and rec.median_us is None and rec.stddev_us is None and rec.share is None
    assert rec.in_shapes == "1x3x224x224;64x3x7x7" and rec.in_dtypes == "float32;float32"
    assert rec.counters == "" and rec.backend is None and rec.model_name == "model" and rec.provider == ""


def test_the_readme_documents_every_record_field() -> None:
    text = README.read_text()
    section = text[text.index("## Per-layer records"):]
    section = section[:section.index("\n## ", 1)]
    documented = re.findall(r"^\| `(\w+)` \|", section, re.M)
    assert documented == [f.name for f in dataclasses.fields(LayerRecord)]
