"""A tiny helper for writing ONNX graphs by hand: unique names, seeded weights, shared constants.

Every node gets the name it is given and its single output tensor carries the same name, which
keeps profiles readable (``layer1.0.conv1`` is both the layer and what it produced). Duplicate
names are a bug in a model builder, so they raise instead of being silently renamed.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
from onnx import ModelProto, NodeProto, TensorProto, ValueInfoProto, helper, numpy_helper

OPSET = 17  # LayerNormalization needs >= 17
IR_VERSION = 8  # the oldest IR that opset 17 allows, so any recent onnxruntime loads it

_DTYPES = {"float32": TensorProto.FLOAT, "int64": TensorProto.INT64}


class GraphBuilder:
    """Collects nodes, initializers and graph inputs/outputs for one model.

    With ``materialize=False`` no weight data is generated: the builder only counts parameters,
    which lets ``zoo.describe`` walk a model's architecture in milliseconds.
    """

    def __init__(self, name: str, seed: int, *, materialize: bool = True) -> None:
        self.name = name
        self.seed = seed
        self.materialize = materialize
        self.param_count = 0
        self.nodes: list[NodeProto] = []
        self.initializers: list[TensorProto] = []
        self.inputs: list[ValueInfoProto] = []
        self.outputs: list[ValueInfoProto] = []
        self.input_specs: list[tuple[str, str, tuple[int, ...]]] = []  # (name, dtype, shape), for describe()
        self._rng = np.random.default_rng(seed)
        self._node_names: set[str] = set()
        self._tensor_names: set[str] = set()
        self._consts: dict[tuple[str, tuple[Any, ...]], str] = {}

    # -- names ---------------------------------------------------------------------------------

    def _claim_tensor(self, name: str) -> str:
        if not name or name in self._tensor_names:
            raise ValueError(f"tensor name {name!r} is empty or already used in {self.name}")
        self._tensor_names.add(name)
        return name

    def _claim_node(self, name: str) -> str:
        if not name or name in self._node_names:
            raise ValueError(f"node name {name!r} is empty or already used in {self.name}")
        self._node_names.add(name)
        return name

    # -- graph inputs and outputs --------------------------------------------------------------

    def input(self, name: str, dtype: str, shape: Sequence[int]) -> str:
        """Declare a graph input and return its tensor name."""
        self.inputs.append(helper.make_tensor_value_info(self._claim_tensor(name), _DTYPES[dtype], shape))
        self.input_specs.append((name, dtype, tuple(shape)))
        return name

    def output(self, name: str, dtype: str, shape: Sequence[int]) -> None:
        """Declare an existing tensor (usually a node's output) as a graph output."""
        if name not in self._tensor_names:
            raise ValueError(f"graph output {name!r} is not produced by any node in {self.name}")
        self.outputs.append(helper.make_tensor_value_info(name, _DTYPES[dtype], shape))

    # -- nodes ---------------------------------------------------------------------------------

    def op(self, op_type: str, name: str, *inputs: str, **attrs: Any) -> str:
        """Add a single-output node; its output tensor is named after the node."""
        return self.op_multi(op_type, name, inputs, [name], **attrs)[0]

    def op_multi(
        self, op_type: str, name: str, inputs: Sequence[str], outputs: Sequence[str], **attrs: Any
    ) -> list[str]:
        """Add a node with explicit output names ("" leaves an optional output unused)."""
        for out in outputs:
            if out:
                self._claim_tensor(out)
        node = helper.make_node(op_type, list(inputs), list(outputs), name=self._claim_node(name), **attrs)
        self.nodes.append(node)
        return list(outputs)

    # -- initializers --------------------------------------------------------------------------

    def _add_initializer(self, name: str, array: np.ndarray) -> str:
        self._claim_tensor(name)
        if self.materialize:
            self.initializers.append(numpy_helper.from_array(array, name))
        return name

    def normal(self, name: str, shape: Sequence[int], std: float) -> str:
        """A learned float32 weight drawn from N(0, std^2)."""
        self.param_count += math.prod(shape)
        if not self.materialize:
            return self._claim_tensor(name)
        data = self._rng.standard_normal(tuple(shape), dtype=np.float32)
        data *= np.float32(std)
        return self._add_initializer(name, data)

    def uniform(self, name: str, shape: Sequence[int], bound: float) -> str:
        """A learned float32 weight drawn from U(-bound, bound)."""
        self.param_count += math.prod(shape)
        if not self.materialize:
            return self._claim_tensor(name)
        data = self._rng.uniform(-bound, bound, size=tuple(shape)).astype(np.float32)
        return self._add_initializer(name, data)

    def he_normal(self, name: str, shape: Sequence[int], fan_in: int) -> str:
        """He-normal weight (std sqrt(2/fan_in)): keeps ReLU activations at a steady scale."""
        return self.normal(name, shape, math.sqrt(2.0 / fan_in))

    def filled(self, name: str, shape: Sequence[int], value: float) -> str:
        """A learned float32 parameter with a constant start value (LayerNorm gamma/beta...)."""
        self.param_count += math.prod(shape)
        return self._add_initializer(name, np.full(tuple(shape), value, dtype=np.float32))

    def buffer(self, name: str, array: np.ndarray) -> str:
        """A named constant that is not a learned parameter (BN running stats, masks)."""
        return self._add_initializer(name, array)

    def ints(self, *values: int) -> str:
        """A shared int64 1-D constant (shapes, axes, split sizes), created once per value."""
        return self._const("ints", values, np.array(values, dtype=np.int64))

    def scalar(self, value: float) -> str:
        """A shared float32 0-D constant, created once per value."""
        return self._const("float", (value,), np.array(value, dtype=np.float32))

    def _const(self, kind: str, key: tuple[Any, ...], array: np.ndarray) -> str:
        cached = self._consts.get((kind, key))
        if cached is not None:
            return cached
        label = "_".join(str(v) for v in key)
        name = self._add_initializer(f"const.{kind}.{label}", array)
        self._consts[(kind, key)] = name
        return name

    # -- result --------------------------------------------------------------------------------

    def model(self, doc: str = "") -> ModelProto:
        """Assemble the ModelProto (opset 17, IR 8)."""
        if not self.materialize:
            raise RuntimeError("a dry-run GraphBuilder holds no weights and cannot make a model")
        graph = helper.make_graph(
            self.nodes, self.name, self.inputs, self.outputs, initializer=self.initializers, doc_string=doc
        )
        return helper.make_model(
            graph,
            opset_imports=[helper.make_opsetid("", OPSET)],
            ir_version=IR_VERSION,
            producer_name="layerperf.models.zoo",
            doc_string=doc,
        )
