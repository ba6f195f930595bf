"""ONNX nodes followed to the Relax VM's calls, on zoo models fused and unfused: every node accounted
for, and each call's output equal to ONNX Runtime's value of the node it is mapped to."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

pytest.importorskip("tvm")
os.environ.setdefault("TVM_NUM_THREADS", "1")

import onnx  # noqa: E402

from layerperf.backends.tvm.build import Build, build  # noqa: E402
from layerperf.backends.tvm.calls import is_builtin  # noqa: E402
from layerperf.backends.tvm.instrument import Runner  # noqa: E402
from layerperf.models import zoo  # noqa: E402
from tvm_models import every_value, feed, mismatches  # noqa: E402

CASES = [("resnet18", "default"), ("resnet18", "unfused"), ("resnet18", "legalize"), ("bert-base", "default"),
         ("bert-base", "unfused")]


@pytest.fixture(scope="module", autouse=True)
def _cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("LAYERPERF_CACHE", str(tmp_path_factory.mktemp("cache")))
        yield


def zoo_model(name: str) -> onnx.ModelProto:
    return zoo.build(name, image_size=32) if name != "bert-base" else zoo.build(name, seq_len=8)


@pytest.fixture(scope="module")
def builds() -> dict[tuple[str, str], tuple[onnx.ModelProto, Build]]:
    out = {}
    for name, pipeline in CASES:
        model = zoo_model(name)
        out[name, pipeline] = model, build(model, pipeline=pipeline, use_cache=False)
    return out


@pytest.mark.parametrize(("name", "pipeline"), CASES)
def test_every_node_is_accounted_for(builds: dict, name: str, pipeline: str) -> None:
    model, b = builds[name, pipeline]
    cov = b.cmap.coverage()
    assert sum(cov.values()) == len(model.graph.node)
    assert cov["unmapped"] == 0 and cov["folded"] == 0, cov
    # What the importer resolves by itself does no work at run time (bert's position-id Gathers).
    assert cov["import"] == (2 if name == "bert-base" else 0)
    assert not b.cmap.warnings
    kernels = b.cmap.kernels()
    assert kernels and all(s.nodes for s in kernels), "every kernel call computes some node"


def test_fused_kernels_list_their_nodes_in_order(builds: dict) -> None:
    model, b = builds["resnet18", "default"]
    ops = {s.func: [model.graph.node[n].op_type for n in s.nodes] for s in b.cmap.kernels()}
    assert ops["fused_batch_norm_relu"] == ["BatchNormalization", "Relu"]
    assert ops["fused_batch_norm1_add_relu1"] == ["BatchNormalization", "Add", "Relu"]
    assert len(b.cmap.kernels()) < len(builds["resnet18", "unfused"][1].cmap.kernels())


def test_a_shared_fused_function_maps_each_call_to_its_own_nodes(builds: dict) -> None:
    _, b = builds["resnet18", "default"]
    sites = [s for s in b.cmap.kernels() if s.func == "conv2d1"]
    assert len(sites) == 4  # one compiled function, four call sites
    assert len({s.nodes for s in sites}) == 4
    all_nodes = [n for s in b.cmap.sites for n in s.nodes]
    assert len(all_nodes) == len(set(all_nodes)), "a node is in one call only when fused"


def test_unfused_ops_that_legalize_to_several_kernels_share_their_node(builds: dict) -> None:
    model, b = builds["bert-base", "unfused"]
    first_gather = next(i for i, n in enumerate(model.graph.node) if n.op_type == "Gather"
                        and b.cmap.node_status[i] == "kernel")
    funcs = [s.func for s in b.cmap.sites_of(first_gather)]
    assert len(funcs) > 1 and funcs[-1].startswith("take")  # index fix-up kernels, then the gather


def test_builtins_serve_the_kernel_next_to_them(builds: dict) -> None:
    _, b = builds["resnet18", "default"]
    for site in b.cmap.sites:
        if site.func == "vm.builtin.alloc_storage" and site.serves is not None:
            assert site.serves > site.call and not is_builtin(b.cmap.sites[site.serves].func)
        if site.func == "vm.builtin.null_value" and site.serves is not None:
            assert site.serves < site.call


@pytest.mark.parametrize(("name", "pipeline"), [
    ("resnet18", "default"), ("resnet18", "unfused"),
    # 12 s: every value of BERT compared; its calls' nodes are checked above on every run (LAYERPERF_SLOW=1)
    pytest.param("bert-base", "default", marks=pytest.mark.skipif(not os.environ.get("LAYERPERF_SLOW"),
                                                                   reason="slow: set LAYERPERF_SLOW=1"))])
def test_each_call_writes_the_value_of_its_node(builds: dict, name: str, pipeline: str) -> None:
    model, b = builds[name, pipeline]
    inputs = feed(model)
    runner = Runner(b.executable, b.device, [inputs[i.name] for i in model.graph.input], b.cmap)
    written = runner.outputs({s.call for s in b.cmap.sites if s.nodes})
    assert not mismatches(model, b.cmap, written, every_value(model, inputs))
