"""A model's layers as ONNX Runtime will run them, found without a timed run.

ONNX Runtime fuses and re-lays out a graph before it runs it (Conv+BatchNorm+Relu into one Conv, a
blocked NCHWc layout with its Reorder nodes, attention into one kernel...), and what a profile
measures are those fused nodes. So the layers a prediction is made of are the nodes of the graph the
runtime writes out as its optimized model (:func:`layerperf.backends.ort.measure.optimized_graph`: a
session that is built, never run), each costed by layerperf's cost model on the shapes inferred from
the model's inputs at the asked batch — the same :class:`~layerperf.data.layer.Layer` a profile
builds from its events (:func:`layerperf.backends.ort.layers.node_layer`), less the times.
"""

from __future__ import annotations

import onnx

from layerperf.backends.ort.layers import initializer_infos, node_layer
from layerperf.backends.ort.measure import optimized_graph
from layerperf.backends.ort.options import OrtOptions
from layerperf.cost.onnx.graph import tensor_infos
from layerperf.cost.onnx.layout import has_blocked, real_channels
from layerperf.data.layer import Layer
from layerperf.data.tensor import TensorInfo
from layerperf.dataset.config import batch_changes
from layerperf.dataset.predict.features import Op
from layerperf.dataset.predict.training import MeasuredConfig
from layerperf.errors import LayerperfError
from layerperf.models.inputs import batch_shapes, onnx_input_specs, parse_shapes, resolve_shapes
from layerperf.models.source import ModelSource, open_model
from layerperf.models.zoo import names as zoo_names

PROVIDER = "CPUExecutionProvider"


def open_at_batch(model: str, batch: int | None) -> ModelSource:
    """The model as a sweep measures it at ``batch``: a built-in model built at that batch, a file as it is
    (its free leading dimensions sized ``batch`` when it is fed, see :func:`input_infos`)."""
    if model in zoo_names():
        return open_model(model, **({"batch": batch} if batch is not None else {}))
    return open_model(model)


def fixed_batch(source: ModelSource) -> tuple[str, int | None] | None:
    """A model file ``--batch`` does not change (``collect``'s rule, :func:`batch_changes`: it stores such a
    file without a batch): its first input's name and leading dimension (None for an input without one, a
    scalar); None for a built-in model or a file with a free leading dimension."""
    if source.zoo or batch_changes(source.proto):
        return None
    specs = onnx_input_specs(source.proto)
    first = specs[0] if specs else None
    if first is None:
        return "", None
    lead = first.shape[0] if first.shape else None
    return first.name, lead if isinstance(lead, int) else None


def input_infos(source: ModelSource, batch: int | None) -> dict[str, TensorInfo]:
    """The inputs a run at ``batch`` feeds: a file's free leading dimensions sized ``batch``, its other free
    dimensions their defaults (as ``collect`` and ``profile`` feed them)."""
    given = parse_shapes(batch_shapes(source.proto, batch)) if batch is not None and not source.zoo else {}
    specs = onnx_input_specs(source.proto)
    shapes = resolve_shapes(specs, given)
    return {s.name: TensorInfo(s.name, shapes[s.name], s.dtype) for s in specs}


def runtime_layers(model: str, batch: int | None, opt_level: str = "all",
                   provider: str = PROVIDER, source: ModelSource | None = None) -> list[Layer]:
    """The layers ONNX Runtime runs for ``model`` at ``batch`` and ``opt_level``, in graph order, costed;
    InputError for a model that cannot be opened (one line). ``source``: the model already opened at
    ``batch``."""
    source = open_at_batch(model, batch) if source is None else source
    optimized = optimized_graph(source, OrtOptions(opt_level=opt_level, provider=provider))
    return graph_layers(optimized, input_infos(source, batch), source.proto, provider)


def graph_layers(optimized: onnx.ModelProto, given: dict[str, TensorInfo], original: onnx.ModelProto | None,
                 provider: str = PROVIDER) -> list[Layer]:
    """One layer per node of ``optimized``'s main graph, shapes inferred from ``given`` (the inputs);
    ``original``, the model it was optimized from, tells the real channels an NCHWc layout padded."""
    infos = tensor_infos(optimized, given)
    inits = initializer_infos(optimized)
    channels = None
    if has_blocked(optimized):
        channels = real_channels(optimized, infos, tensor_infos(original, given) if original is not None else None)
    layers = []
    for i, node in enumerate(optimized.graph.node):
        ins = tuple(infos.get(n) if n else None for n in node.input)
        outs = tuple(infos.get(n) if n else None for n in node.output)
        layers.append(node_layer(node.name or f"{node.op_type}_{i}", None, node, ins, outs, inits, channels,
                                 provider))
    return layers


class GraphLayers:
    """Each configuration's layers as a prediction for a new model finds them: from its model's optimized
    graph (once per model, batch and level). The store's recorded layers where that cannot be done here:
    a backend other than ONNX Runtime, a model file no longer at its path (``failed`` says why)."""

    def __init__(self) -> None:
        self.cache: dict[tuple[str, int | None, str], tuple[Op, ...] | None] = {}
        self.failed: dict[str, str] = {}

    def __call__(self, cfg: MeasuredConfig) -> tuple[tuple[Op, ...], str]:
        f = cfg.factors
        if f.backend != "onnxruntime" or f.opt_level is None:
            return cfg.ops, "store"
        key = (cfg.model, f.batch, f.opt_level)
        if key not in self.cache:
            try:
                self.cache[key] = tuple(Op.of_layer(layer) for layer in runtime_layers(cfg.model, f.batch,
                                                                                       f.opt_level))
            except LayerperfError as exc:
                self.cache[key], self.failed[cfg.model] = None, str(exc)
        ops = self.cache[key]
        return (cfg.ops, "store") if ops is None else (ops, "graph")
