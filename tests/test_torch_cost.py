"""The PyTorch backend's per-module work: views move no bytes, and ops without a torch.utils.flop_counter
formula count what layerperf's ONNX cost model counts for the ONNX op they stand for."""

from __future__ import annotations

import math
from typing import Any

import pytest

torch = pytest.importorskip("torch")

import layerperf  # noqa: E402
import layerperf.torch as lt  # noqa: E402
from layerperf.backends.torch.record import Seen, add_op, counting_mode  # noqa: E402
from layerperf.cost.aten.live import is_view  # noqa: E402
from layerperf.cost.onnx import node_cost  # noqa: E402
from layerperf.data.tensor import TensorInfo  # noqa: E402

nn = torch.nn
F4 = 4  # bytes of a float32


def _count(fn: Any, *args: Any) -> Seen:
    """The work of ``fn(*args)`` as the recorder counts a module's own ops."""
    seen = Seen("m", "m", None)
    with torch.no_grad(), counting_mode(lambda f, a, k, o: add_op(seen, f, a, k, o)):
        fn(*args)
    return seen


def _t(shape: tuple[int, ...], name: str = "x") -> TensorInfo:
    return TensorInfo(name, shape, "float32")


def _onnx_flops(op_type: str, shape: tuple[int, ...], attrs: dict[str, object] | None = None,
                n_in: int = 1) -> int | None:
    """The cost model's FLOPs of an ONNX op whose inputs and output all have ``shape``."""
    ins = [_t(shape, f"in{k}") for k in range(n_in)]
    return node_cost(op_type, "", attrs or {}, ins, [_t(shape, "y")]).flops


# -- bytes ---------------------------------------------------------------------------------------


def test_bias_free_linear_reads_its_operands_once() -> None:
    x = torch.randn(64, 256)
    seen = _count(nn.Linear(256, 256, bias=False), x)
    assert seen.ops == ["t", "mm"]  # t(W) is a view: no bytes
    assert seen.bytes_read == 64 * 256 * F4 + 256 * 256 * F4  # x 64 KiB + W 256 KiB
    assert seen.bytes_written == 64 * 256 * F4  # y 64 KiB
    assert seen.bytes_read + seen.bytes_written == 384 * 1024  # was 896 KiB with t counted
    assert seen.flops == 2 * 64 * 256 * 256


def test_linear_with_bias_is_the_cost_models_gemm() -> None:
    x = torch.randn(64, 256)
    seen = _count(nn.Linear(256, 128), x)
    gemm = node_cost("Gemm", "", {"transB": 1}, [_t((64, 256)), _t((128, 256), "w"), _t((128,), "b")],
                     [_t((64, 128), "y")])
    assert (seen.flops, seen.bytes_read, seen.bytes_written) == (gemm.flops, gemm.bytes_read, gemm.bytes_written)
    assert seen.flops == 2 * 64 * 256 * 128 + 64 * 128  # the bias add counts, as in Gemm


def test_linear_on_3d_input_counts_only_the_matmul_operands() -> None:
    x = torch.randn(2, 7, 16)
    seen = _count(nn.Linear(16, 8, bias=False), x)
    assert "view" in seen.ops and "_unsafe_view" in seen.ops  # the reshapes around mm: views
    assert seen.bytes_read == (2 * 7 * 16 + 16 * 8) * F4 and seen.bytes_written == 2 * 7 * 8 * F4


def test_conv_bytes_and_flops_as_before_and_as_onnx() -> None:
    x = torch.randn(1, 8, 16, 16)
    seen = _count(nn.Conv2d(8, 16, 3, padding=1, bias=False), x)
    assert seen.bytes_read == (8 * 16 * 16 + 16 * 8 * 9) * F4 and seen.bytes_written == 16 * 16 * 16 * F4
    assert seen.flops == 2 * 16 * 16 * 16 * 8 * 9
    conv = node_cost("Conv", "", {}, [_t((1, 8, 16, 16)), _t((16, 8, 3, 3), "w")], [_t((1, 16, 16, 16), "y")])
    assert seen.flops == conv.flops


def test_views_move_nothing() -> None:
    x = torch.randn(8, 16)
    seen = _count(lambda t: t.reshape(4, 32).t().unsqueeze(0).expand(3, 32, 4).transpose(1, 2).detach(), x)
    assert len(seen.ops) == 6 and seen.bytes_read == seen.bytes_written == 0 and seen.flops == 0
    # a reshape that must copy (of a transposed tensor) is a clone: it moves the tensor
    copied = _count(lambda t: t.t().reshape(4, 32), x)
    assert "clone" in copied.ops and copied.bytes_read == copied.bytes_written == 8 * 16 * F4
    # the rule is the schema's: a result aliasing an argument it does not write
    assert all(is_view(op) for op in (torch.ops.aten.t.default, torch.ops.aten.view.default,
                                      torch.ops.aten.expand.default, torch.ops.aten.transpose.int))
    assert not any(is_view(op) for op in (torch.ops.aten.add_.Tensor, torch.ops.aten.mul.Tensor,
                                          torch.ops.aten.copy_.default, torch.ops.aten.clone.default))


def test_copies_and_in_place_ops_move_data() -> None:
    x, y = torch.randn(8, 16), torch.randn(8, 16)
    copy = _count(lambda t: t.t().contiguous(), x)  # a real copy: read and written
    assert copy.bytes_read == copy.bytes_written == 8 * 16 * F4
    inplace = _count(lambda a, b: a.add_(b), x, y)  # reads both, writes what it changes
    assert inplace.bytes_read == 2 * 8 * 16 * F4 and inplace.bytes_written == 8 * 16 * F4
    assert inplace.flops == 8 * 16
    overwrite = _count(lambda a, b: a.copy_(b), x, y)  # copy_ reads its source only
    assert overwrite.bytes_read == overwrite.bytes_written == 8 * 16 * F4 and overwrite.flops == 0
    square = _count(lambda t: t * t, x)  # one tensor fed twice is read once, as in the cost model
    assert square.bytes_read == 8 * 16 * F4


# -- FLOPs as the cost model's -------------------------------------------------------------------


SHAPE = (4, 8, 6, 6)


@pytest.mark.parametrize(("module", "op_type", "attrs"), [
    (nn.ReLU(), "Relu", {}),
    (nn.Sigmoid(), "Sigmoid", {}),
    (nn.Tanh(), "Tanh", {}),
    (nn.SiLU(), "Swish", {}),
    (nn.Hardswish(), "HardSwish", {}),
    (nn.GELU(), "Gelu", {}),
    (nn.GELU(approximate="tanh"), "Gelu", {"approximate": "tanh"}),
    (nn.Softmax(dim=-1), "Softmax", {}),
    (nn.LogSoftmax(dim=-1), "LogSoftmax", {}),
    (nn.LayerNorm(SHAPE[-1]), "LayerNormalization", {}),
    (nn.BatchNorm2d(SHAPE[1]).eval(), "BatchNormalization", {}),
    (nn.GroupNorm(2, SHAPE[1]), "GroupNormalization", {}),
])
def test_module_flops_equal_the_onnx_ops(module: Any, op_type: str, attrs: dict[str, object]) -> None:
    seen = _count(module, torch.randn(*SHAPE))
    expected = _onnx_flops(op_type, SHAPE, attrs)
    assert expected is not None and expected > 0
    assert seen.flops == expected and seen.int_ops == 0 and not seen.unknown_ops


def test_binary_reductions_and_pools_equal_the_onnx_ops() -> None:
    a, b = torch.randn(*SHAPE), torch.randn(SHAPE[-1])
    assert _count(torch.add, a, b).flops == node_cost(
        "Add", "", {}, [_t(SHAPE), _t((SHAPE[-1],), "b")], [_t(SHAPE, "y")]).flops == math.prod(SHAPE)
    assert _count(torch.mul, a, b).flops == math.prod(SHAPE)
    out = (SHAPE[0], SHAPE[1], 1, 1)
    gap = node_cost("GlobalAveragePool", "", {}, [_t(SHAPE)], [_t(out, "y")]).flops
    assert _count(nn.AdaptiveAvgPool2d(1), a).flops == gap
    assert _count(lambda t: t.sum(dim=(2, 3)), a).flops == node_cost(
        "ReduceSum", "", {}, [_t(SHAPE)], [_t(SHAPE[:2], "y")]).flops
    pooled = _count(nn.MaxPool2d(3, 2, 1), a)
    pool = node_cost("MaxPool", "", {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]},
                     [_t(SHAPE)], [_t((4, 8, 3, 3), "y")]).flops
    assert pool is not None and pooled.flops == pool


def test_batch_norm_in_training_counts_its_statistics() -> None:
    # batch statistics (mean, subtract, square, variance, normalize, scale, shift): the cost model's
    # normalizations that compute statistics, not the inference BatchNormalization's folded scale and shift
    seen = _count(nn.BatchNorm2d(SHAPE[1]).train(), torch.randn(*SHAPE))
    assert seen.flops == _onnx_flops("InstanceNormalization", SHAPE) == _onnx_flops("LayerNormalization", SHAPE)


def test_an_op_with_no_formula_stays_unknown() -> None:
    seen = _count(torch.lgamma, torch.randn(4, 4))
    assert seen.flops is None and seen.unknown_ops == {"lgamma"}


# -- a training step -----------------------------------------------------------------------------


def test_linear_relu_training_step_backward_rows_known() -> None:
    from torch.utils.flop_counter import FlopCounterMode

    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 8)).train()
    x = torch.randn(5, 32)
    with lt.Profiler() as prof:
        net(x).sum().backward()
    flops = {layer.name: layer.flops for layer in prof.profile.layers}
    # torch's own count of the same forward and backward (matmuls only)
    with FlopCounterMode(display=False) as fwd_counter:
        out = net(x)
    with FlopCounterMode(display=False) as back_counter:
        torch.autograd.grad([out], list(net.parameters()), grad_outputs=[torch.ones_like(out)])
    # documented extra counts: each bias add and each bias gradient (a sum over the batch) 1 an element
    # of the Linear's output, ReLU and its threshold_backward 1 an element
    extra = 5 * 64 + 5 * 8 + 5 * 64
    forward = flops["0"] + flops["1"] + flops["2"]  # type: ignore[operator]
    assert forward == fwd_counter.get_total_flops() + extra
    backward = [flops[f"{k} (backward)"] for k in range(3)]
    assert all(f is not None for f in backward)
    assert flops["1 (backward)"] == 5 * 64  # threshold_backward
    assert sum(f for f in backward if f is not None) == back_counter.get_total_flops() + extra
    assert not any("FLOPs unknown" in w for w in prof.profile.warnings), prof.profile.warnings


# -- the zoo's resnet18 on both backends ---------------------------------------------------------


@pytest.fixture(scope="module")
def resnet18_torch() -> layerperf.Profile:
    return layerperf.profile("resnet18", backend="torch", image_size=32, runs=1, warmup=0, threads=1)


def _total(prof: layerperf.Profile) -> int:
    assert all(layer.flops is not None for layer in prof.layers)
    return sum(layer.flops or 0 for layer in prof.layers)


def test_resnet18_equals_onnxruntime_unoptimized_layer_by_layer(resnet18_torch: layerperf.Profile) -> None:
    ort = layerperf.profile("resnet18", image_size=32, runs=1, warmup=0, threads=1, opt_level="disable")
    by_name = {layer.name: layer for layer in ort.layers}
    matched = [(t, by_name[t.name]) for t in resnet18_torch.layers if t.name in by_name]
    assert len(matched) == len(ort.layers)  # every ONNX node is a module of the same name
    for t, o in matched:
        assert t.flops == o.flops, t.name  # Conv, Gemm, BatchNormalization, Relu, Add, pools
        if t.op_type in ("Conv2d", "Linear", "BatchNorm2d", "ReLU"):
            assert (t.bytes_read, t.bytes_written) == (o.bytes_read, o.bytes_written), t.name
    # bytes that differ, both real: torch's max_pool2d writes int64 indices besides the output; torch's
    # flatten is a view (0 bytes), which the cost model counts as a read and a write (an upper bound)
    maxpool = [t for t, _ in matched if t.name == "maxpool"][0]
    assert maxpool.bytes_written == by_name["maxpool"].bytes_written * 3  # + int64 indices
    assert [t.bytes_written for t, _ in matched if t.name == "flatten"] == [0]
    assert _total(resnet18_torch) == _total(ort)


def test_resnet18_against_onnxruntime_optimized_differs_by_folded_batch_norm(
        resnet18_torch: layerperf.Profile) -> None:
    ort = layerperf.profile("resnet18", image_size=32, runs=1, warmup=0, threads=1)
    fc_t = [t for t in resnet18_torch.layers if t.name == "fc"][0]
    fc_o = [o for o in ort.layers if o.op_type == "Gemm"][0]
    assert (fc_t.flops, fc_t.bytes_read, fc_t.bytes_written) == (fc_o.flops, fc_o.bytes_read, fc_o.bytes_written)
    # ONNX Runtime folds each BatchNormalization (2 FLOPs an element) into its Conv's bias (1 an element)
    # and fuses the ReLUs and residual adds into the Conv at the same count: the totals differ by 1 FLOP
    # per batch-norm element
    bn = [t for t in resnet18_torch.layers if t.op_type == "BatchNorm2d"]
    bn_elements = sum(math.prod(int(d) for d in t.outputs[0].shape or ()) for t in bn)
    assert len(bn) == 20 and bn_elements > 0
    assert _total(resnet18_torch) - _total(ort) == bn_elements
    # each Conv: its torch module's 2*MACs plus the folded bias, the fused ReLU and residual add
    convs_t = sum(t.flops or 0 for t in resnet18_torch.layers if t.op_type in ("Conv2d", "ReLU", "Add"))
    convs_o = sum(o.flops or 0 for o in ort.layers if o.op_type in ("Conv", "FusedConv"))
    assert convs_o == convs_t + bn_elements


def test_attention_counts_its_math_path() -> None:
    """Under the counting mode scaled_dot_product_attention runs torch's math path, on CPU tensors as on
    meta ones (level 2's replay): Q and K each scaled by the root of the scale, QK^T, the softmax
    (``_safe_softmax``, 5 FLOPs a score as the cost model's Softmax), AV — all known."""
    import torch.nn.functional as fn

    b, h, lq, s, e, ev = 2, 4, 8, 12, 16, 32
    q, k, v = torch.randn(b, h, lq, e), torch.randn(b, h, s, e), torch.randn(b, h, s, ev)
    scores = b * h * lq * s
    expected = b * h * (lq + s) * e + 2 * scores * e + 5 * scores + 2 * scores * ev
    seen = _count(fn.scaled_dot_product_attention, q, k, v)
    assert "_safe_softmax" in seen.ops and seen.flops == expected and not seen.unknown_ops
    assert _count(fn.scaled_dot_product_attention, *[t.to("meta") for t in (q, k, v)]).flops == expected


def test_the_cpu_flash_attention_kernel_counts_what_the_math_path_does() -> None:
    """transformers' attention under inference_mode reaches the CPU flash kernel directly (no formula in
    flop_counter): counted as the math path (the same sum as above), mask or causal bias adding one FLOP a
    score; its backward as the math path's backward."""
    b, h, lq, s, e, ev = 2, 4, 8, 12, 16, 16
    q, k, v = torch.randn(b, h, lq, e), torch.randn(b, h, s, e), torch.randn(b, h, s, ev)
    scores = b * h * lq * s
    plain = b * h * (lq + s) * e + 2 * scores * e + 5 * scores + 2 * scores * ev
    flash = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu
    assert _count(flash, q, k, v).flops == plain
    assert _count(lambda *a: flash(*a, 0.0, True), q, k, v).flops == plain + scores
    grad = torch.randn(b, h, lq, ev)
    out, lse = flash(q, k, v)
    back = _count(torch.ops.aten._scaled_dot_product_flash_attention_for_cpu_backward, grad, q, k, v, out, lse,
                  0.0, False)
    assert back.flops == b * h * (lq + s) * e + 4 * scores * (e + ev) + 4 * scores and not back.unknown_ops


def test_gathers_read_the_rows_they_copy() -> None:
    """An embedding lookup reads the looked-up rows and the indices, not the whole table (as the cost
    model's Gather): 3 rows of a 1000 x 64 table."""
    table, ids = torch.randn(1000, 64), torch.tensor([1, 5, 7])
    seen = _count(torch.nn.functional.embedding, ids, table)
    assert seen.bytes_read == 3 * 64 * F4 + 3 * 8 and seen.bytes_written == 3 * 64 * F4 and seen.flops == 0
    seen = _count(lambda t, i: t.index_select(0, i), table, ids)
    assert seen.bytes_read == 3 * 64 * F4 + 3 * 8


def test_select_backward_and_tril_move_data_only() -> None:
    x = torch.randn(4, 6, requires_grad=True)
    seen = Seen("m", "m", None)
    y = x[1].sum()
    with counting_mode(lambda f, a, k, o: add_op(seen, f, a, k, o)):
        torch.autograd.grad(y, x)
    assert "select_backward" in seen.ops and seen.flops is not None and not seen.unknown_ops
    mask = _count(torch.tril, torch.ones(5, 5, dtype=torch.bool))
    assert mask.int_ops == 0 and mask.flops == 0


def test_level2_cat_counts_its_list_of_tensors_and_an_empty_module_zero() -> None:
    """At level 2 cat's inputs (a list of tensors) are read from what the profiler recorded: its shapes,
    dtypes and bytes are level 1's (x listed twice is read once); a module that ran no op (Identity) did
    no work: 0, counted."""
    class M(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc, self.idle = nn.Linear(8, 8), nn.Identity()

        def forward(self, x: Any) -> Any:
            return self.idle(self.fc(torch.cat((x, x), dim=1)))

    x = torch.randn(2, 4, 8)
    with lt.Profiler(level=2) as p, torch.inference_mode():
        M().eval()(x)
    by_name = {layer.name: layer for layer in p.profile.layers}
    cat, live = by_name["aten::cat"], _count(lambda: torch.cat((x, x), dim=1))
    assert (cat.flops, cat.int_ops, cat.bytes_read, cat.bytes_written) == (0, 0, 2 * 4 * 8 * F4, 2 * 8 * 8 * F4)
    assert (cat.bytes_read, cat.bytes_written) == (live.bytes_read, live.bytes_written)
    assert [(t.shape, t.dtype) for t in cat.inputs] == [((2, 4, 8), "float32")] * 2
    assert by_name["idle"].flops == 0 and by_name["idle"].bytes == 0
    from layerperf.analysis.summary import summary

    # the module fc, whose work is on its op row, is no layer the totals count: not among the unknown ones
    figures = summary(p.profile)
    assert figures["flops_unknown_layers"] == 0 and figures["unknown_in_totals"]["bytes"] == 0


@pytest.mark.parametrize("op", ["cat_empty_piece", "stack", "cat_mixed", "hstack", "meshgrid"])
def test_level2_ops_on_lists_of_tensors_count_what_level_1_counts(op: str) -> None:
    """Each op that takes a list of tensors is replayed on the recorded list (dims, strides, and the
    element types the profiler's event tree keeps): FLOPs and bytes equal level 1's count of the same call.
    A cat with an empty piece (a KV cache's first step) is its copy of the other piece, not the narrow
    view it calls; pieces of two types are promoted as torch promotes them."""
    a, b = torch.randn(2, 3), torch.randn(2, 3)
    calls = {"cat_empty_piece": lambda: torch.cat([torch.tensor([]), a.flatten()], 0),
             "stack": lambda: torch.stack([a, b, a], 1),
             "cat_mixed": lambda: torch.cat([a, b.half()], 0),
             "hstack": lambda: torch.hstack([a, b.t().contiguous().t()]),
             "meshgrid": lambda: torch.meshgrid(a[0], b[0], indexing="ij")}

    class Op(nn.Module):
        def forward(self, x: Any) -> Any:
            return calls[op]()

    with lt.Profiler(level=2) as p, torch.inference_mode():
        nn.Sequential(Op())(a)
    rows = [layer for layer in p.profile.layers if layer.domain == "aten"]
    live = _count(calls[op])
    got = tuple(sum(getattr(r, f) for r in rows) for f in ("flops", "int_ops", "bytes_read", "bytes_written"))
    assert got == (live.flops, live.int_ops, live.bytes_read, live.bytes_written)
    assert all(t.dtype != "unknown" for r in rows for t in r.inputs) and rows[-1].inputs


@pytest.mark.parametrize("other", [torch.tensor(0.0), torch.zeros(8, 8), torch.tensor(2.0)])
def test_where_is_one_flop_an_element_whatever_its_third_argument(other: Any) -> None:
    """where(cond, x, y) is the cost model's Where; its third argument is no add's alpha."""
    x = torch.randn(8, 8)
    assert _count(torch.where, x > 0, x, other).flops == 64  # 1 an output element, no multiply by "alpha"


def test_attention_work_is_the_same_at_both_levels() -> None:
    """Level 2 costs scaled_dot_product_attention as the kernel it called (recorded by the profiler), not
    by a replay on meta tensors, which would take the math path and count the scores' bytes: FLOPs and
    bytes equal level 1's, with and without a mask."""
    import torch.nn.functional as fn

    class Att(nn.Module):
        def forward(self, q: Any, k: Any, v: Any, mask: Any = None) -> Any:
            return fn.scaled_dot_product_attention(q, k, v, attn_mask=mask)

    class M(nn.Module):
        def __init__(self, masked: bool) -> None:
            super().__init__()
            self.att, self.masked = Att(), masked

        def forward(self, q: Any, k: Any, v: Any) -> Any:
            return self.att(q, k, v, torch.zeros(q.shape[-2], k.shape[-2]) if self.masked else None)

    q, k, v = torch.randn(2, 4, 8, 16), torch.randn(2, 4, 12, 16), torch.randn(2, 4, 12, 16)
    for masked in (False, True):
        figures = {}
        for level in (1, 2):
            with lt.Profiler(level=level) as p, torch.inference_mode():
                M(masked).eval()(q, k, v)
            rows = [la for la in p.profile.layers if la.name == "att" or la.parent == "att"]
            known = [la for la in rows if la.flops is not None]
            figures[level] = (sum(la.flops for la in known), sum(la.bytes for la in known))
        assert figures[1] == figures[2] and figures[1][0] > 0


@pytest.mark.parametrize("drop", [nn.Dropout(0.1), nn.Dropout1d(0.1), nn.AlphaDropout(0.1),
                                  nn.FeatureAlphaDropout(0.1)])
def test_a_dropout_in_eval_moves_nothing(drop: Any) -> None:
    """Eagerly, a dropout in eval returns its input itself (same storage, no op runs): 0 bytes, 0 FLOPs, known
    (the counting mode's decomposition copied it: 2x the tensor's bytes)."""
    x = torch.randn(2, 8, 16)
    drop.eval()
    with torch.inference_mode():
        assert drop(x).data_ptr() == x.data_ptr()
    for grad_mode in (torch.no_grad, torch.inference_mode):  # the recorder's runs are in inference mode
        seen = Seen("m", "m", None)
        with grad_mode(), counting_mode(lambda f, a, k, o, seen=seen: add_op(seen, f, a, k, o)):
            drop(x)
        assert (seen.flops, seen.bytes_read, seen.bytes_written) == (0, 0, 0), grad_mode
    drop.train()  # in training it runs: a mask drawn and applied, data moved
    assert _count(drop, x).bytes_written > 0
