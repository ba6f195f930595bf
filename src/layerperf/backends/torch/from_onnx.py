"""An ONNX model run by PyTorch: one module per node, named after the node, so that an ONNX file's
layers can be timed on torch's kernels and set beside ONNX Runtime's. Each node's cost comes from
layerperf's ONNX cost model (its op type is an ONNX op's). An op with no torch kernel here is refused,
in one line, before anything runs."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from layerperf.errors import BackendError

Kernel = Callable[..., Any]


def kernels() -> dict[str, Callable[[dict[str, Any]], Kernel]]:
    """Op type -> (attributes -> kernel taking the node's inputs)."""
    import torch
    import torch.nn.functional as F  # noqa: N812

    def conv(a: dict[str, Any]) -> Kernel:
        pads = a.get("pads", [0, 0, 0, 0])
        half = len(pads) // 2
        if pads[:half] != pads[half:]:
            raise BackendError("the torch backend runs Conv with symmetric pads only")
        return lambda x, w, b=None: F.conv2d(x, w, b, a.get("strides", 1), pads[:half], a.get("dilations", 1),
                                             a.get("group", 1))

    def gemm(a: dict[str, Any]) -> Kernel:
        def run(x: Any, w: Any, c: Any = None) -> Any:
            x = x.T if a.get("transA") else x
            w = w.T if a.get("transB") else w
            y = a.get("alpha", 1.0) * (x @ w)
            return y if c is None else y + a.get("beta", 1.0) * c
        return run

    def maxpool(a: dict[str, Any]) -> Kernel:
        pads = a.get("pads", [0, 0, 0, 0])
        return lambda x: F.max_pool2d(x, a["kernel_shape"], a.get("strides", 1), pads[: len(pads) // 2])

    def same(fn: Kernel) -> Callable[[dict[str, Any]], Kernel]:
        return lambda a: fn

    def grid_sample(a: dict[str, Any]) -> Kernel:
        mode = {"linear": "bilinear", "cubic": "bicubic"}.get(a.get("mode", "linear"), a.get("mode", "linear"))
        return lambda x, g: F.grid_sample(x, g, mode=mode, padding_mode=a.get("padding_mode", "zeros"),
                                          align_corners=bool(a.get("align_corners", 0)))

    return {
        "MatMul": same(torch.matmul), "Add": same(torch.add), "Sub": same(torch.sub), "Mul": same(torch.mul),
        "Div": same(torch.div), "Relu": same(torch.relu), "Tanh": same(torch.tanh), "Sigmoid": same(torch.sigmoid),
        "Erf": same(torch.erf), "Sqrt": same(torch.sqrt), "Pow": same(torch.pow), "Identity": same(lambda x: x),
        "Det": same(torch.linalg.det), "GridSample": grid_sample,
        "Softmax": lambda a: lambda x: torch.softmax(x, a.get("axis", -1)),
        "Conv": conv, "Gemm": gemm, "MaxPool": maxpool,
        "BatchNormalization": lambda a: lambda x, s, b, m, v: F.batch_norm(x, m, v, s, b, False, 0.0,
                                                                            a.get("epsilon", 1e-5)),
        "GlobalAveragePool": same(lambda x: x.mean(dim=tuple(range(2, x.dim())), keepdim=True)),
        "Flatten": lambda a: lambda x: x.reshape(int(torch.tensor(x.shape[: a.get("axis", 1)]).prod()), -1),
        "Reshape": same(lambda x, s: x.reshape([int(d) for d in s])),
        "Transpose": lambda a: lambda x: x.permute(a["perm"]) if "perm" in a else x.T,
        "Clip": same(lambda x, lo=None, hi=None: torch.clamp(x, lo, hi)),
    }


def onnx_module(proto: Any, path: str, inputs: list[str]) -> Any:
    """The ONNX model ``proto`` (read from ``path``) as a module of node modules, called with the
    graph's ``inputs`` (its inputs that are no initializer) in order; BackendError (one line) for an
    op with no kernel here, before anything runs."""
    table = kernels()
    missing = [n for n in proto.graph.node if n.domain not in ("", "ai.onnx") or n.op_type not in table]
    if missing:
        n = missing[0]
        raise BackendError(f"{path}: the torch backend has no kernel for ONNX op type '{n.op_type}' (node "
                           f"'{n.name}')", hint="it runs " + ", ".join(sorted(table)))
    return _graph_module(proto, table, inputs)


def _graph_module(proto: Any, table: dict[str, Callable[[dict[str, Any]], Kernel]], inputs: list[str]) -> Any:
    import torch
    from onnx import numpy_helper

    from layerperf.cost.onnx.graph import attributes

    class Node(torch.nn.Module):
        def __init__(self, node: Any) -> None:
            super().__init__()
            self.attrs = attributes(node)
            self.kernel = table[node.op_type](self.attrs)
            self.layerperf_op_type = node.op_type
            self.layerperf_domain = node.domain
            self.layerperf_io = (list(node.input), list(node.output))

        def forward(self, *args: Any) -> Any:
            return self.kernel(*args)

    class Graph(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.nodes = torch.nn.ModuleDict()
            self.order = []
            for i, node in enumerate(proto.graph.node):
                key = node.name or f"node{i}"
                self.nodes[key.replace(".", "_")] = Node(node)
                self.order.append((self.nodes[key.replace(".", "_")], list(node.input), list(node.output)))
            self.weights = {i.name: torch.from_numpy(numpy_helper.to_array(i).copy())
                            for i in proto.graph.initializer}
            self.layerperf_inputs = list(inputs)
            self.outputs = [o.name for o in proto.graph.output]

        def forward(self, *args: Any) -> Any:
            values = {**self.weights, **dict(zip(self.layerperf_inputs, args, strict=True))}
            for mod, ins, outs in self.order:
                got = mod(*(values[n] for n in ins if n))
                values.update(zip(outs, got if isinstance(got, tuple) else (got,), strict=False))
            return tuple(values[n] for n in self.outputs)

    graph: Any = Graph()
    graph.layerperf_paths = {id(mod): name for (mod, _, _), name in
                             zip(graph.order, [n.name or f"node{i}" for i, n in enumerate(proto.graph.node)],
                                 strict=True)}
    return graph.eval()
