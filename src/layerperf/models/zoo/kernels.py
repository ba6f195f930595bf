"""Kernel sweeps: models made of many independent single-kernel branches, for ``layerperf predict``.

A predictor trained only on whole models knows the kernels those models happen to have: left out of
the store, MobileNetV2 takes its depthwise convolutions for dense ones (three to ten times too fast),
GPT-2's vocabulary head is priced at the rate of small attention products. nn-Meter learns its kernel
predictors from kernels sampled across their configuration space instead. A kernel sweep is that
sample as an ONNX model of independent branches (:class:`_Feed`: each makes its input from one small
graph input and reduces its output to a scalar), each one kernel as the runtime will fuse it (convolution +
batch norm + activation, MatMul + bias, the GELU patterns, LayerNorm with its residual). ``layerperf
collect`` measures a sweep like any other model (every branch is a layer, in situ, in one session);
``predict --evaluate`` trains on sweeps in the store but never holds them out (training data, not models).

The configurations are drawn from generic ranges — channels, widths and spatial sizes log-uniform
between bounds or half the time from a ladder of widths, kernel windows, strides and activations from fixed
choices — by ``numpy.random.default_rng`` seeded with the build's seed (another seed, another sample), not
taken from any model of the zoo. Every branch is capped — each layer's work at batch 1 (:data:`MAX_FLOPS`, a
convolution's :data:`CONV_FLOPS`), its weight (:data:`MAX_WEIGHT`, :data:`LAYER_WEIGHT`) and its activations
(:data:`MAX_ACTIVATION`) — so that a sweep stays within seconds a run and a few GB at batch 8.

- ``kernels-conv``: convolutions — dense 3x3, pointwise 1x1, depthwise 3x3 and 5x5, 5x5 and 7x7 windows,
  3-channel stems — with batch norm and ReLU, ReLU6 or no activation, a fixed number of each; max, average and
  global pooling. Spatial sizes up to the ``image_size``.
- ``kernels-dense``: linear layers on [batch, tokens, features] (MatMul + bias, some wide as a vocabulary
  head), 2-D Gemm with and without ReLU, attention's batched products, Softmax, LayerNormalization and
  residual + LayerNormalization, the erf and tanh GELU patterns, elementwise Add / Mul, Transpose, Split
  and an embedding Gather. Token counts up to twice the ``seq_len``.
- ``kernels-rnn``: LSTM (a 70% chance each) and GRU layers of sampled input and hidden sizes over sequences up to the
  ``seq_len``.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from layerperf.models.zoo._graph import GraphBuilder
from layerperf.models.zoo.transformers import gelu_erf, gelu_tanh
from layerperf.models.zoo.vision import batchnorm, conv

MAX_FLOPS = 1_000_000_000  # per layer at batch 1 (a multiply-add counts 2; a GELU branch has two such layers)
CONV_FLOPS = 4 * MAX_FLOPS  # per convolution: the big ones of classic networks (VGG's 3.7 G) run most efficiently
MAX_WEIGHT = 16 * 1024 * 1024  # weight elements of a Gemm or a wide MatMul (64 MiB of float32: past an L3 cache)
LAYER_WEIGHT = MAX_WEIGHT // 8  # of the other branches with a weight (linear, GELU, embedding)
# elements of any branch's input or output at batch 1 (16 MiB; at batch 8 a
# branch's input, its NCHWc copies and its output stay within half a GiB: uncapped, one 688-channel map of
# 164x164 took 2.4 GB and the profile of the sweep 6.9 GB)
MAX_ACTIVATION = 4 * 1024 * 1024
POOL_BRANCHES = 16
RNN_BRANCHES = 64
_SAMPLE_STREAM = 0x6B65726E  # the sampler's own stream beside the weights' ("kern")


def _sampler(g: GraphBuilder) -> np.random.Generator:
    """The configurations' random stream: fixed by the build's seed, apart from the one the weights come from."""
    return np.random.default_rng([g.seed, _SAMPLE_STREAM])


def _log_uniform(rng: np.random.Generator, low: int, high: int, multiple: int = 1) -> int:
    """An integer log-uniform in [low, high], rounded to a multiple of ``multiple`` (at least ``low``)."""
    value = math.exp(rng.uniform(math.log(low), math.log(high)))
    return max(low, int(round(value / multiple)) * multiple)


class _Feed:
    """Where a sweep's branches get their inputs and leave their outputs. Every branch's input is made in the
    graph from one small graph input (``source``, float32 [1]) by an Expand, and every output is reduced to a
    scalar (ReduceMean) that is the graph output: the runtime frees a branch's tensors once it is done, so a
    sweep holds one branch's activations at a time, not all of them (fed and returned whole, a sweep of
    convolutions at batch 8 took 13 GB); and no kernel writes a graph output, which would keep the runtime
    from fusing it (a GELU whose last op does is left as its seven ops)."""

    def __init__(self, g: GraphBuilder) -> None:
        self.g = g
        self.source = g.input("source", "float32", [1])

    def tensor(self, name: str, shape: list[int]) -> str:
        """A float32 tensor of ``shape`` (the source's value everywhere: timings do not depend on it)."""
        return self.g.op("Expand", name, self.source, self.g.ints(*shape))

    def ids(self, name: str, shape: list[int]) -> str:
        """An int64 tensor of zeros of ``shape``, made from the source at run time (not foldable at load)."""
        zero = self.g.op("Mul", f"{name}.zero", self.source, self.g.scalar(0.0))
        return self.g.op("Cast", name, self.g.op("Expand", f"{name}.expand", zero, self.g.ints(*shape)),
                         to=7)  # onnx.TensorProto.INT64

    def sink(self, tensor: str) -> None:
        """``tensor`` reduced to its mean, a graph output."""
        out = self.g.op("ReduceMean", f"{tensor}.sink", tensor, keepdims=0)
        self.g.output(out, "float32", [])


def _quota(kinds: list[tuple[int, str]]) -> list[str]:
    """Each kind as many times as its count: every kind is in every sweep."""
    return [kind for count, kind in kinds for _ in range(count)]


def _choice(rng: np.random.Generator, options: list[tuple[float, str]]) -> str:
    weights = np.array([w for w, _ in options], dtype=float)
    return options[int(rng.choice(len(options), p=weights / weights.sum()))][1]


# -- convolutions ------------------------------------------------------------------------------------

_CONV_KINDS = [(45, "dense3"), (40, "pointwise"), (35, "depthwise"), (15, "wide"), (15, "stem")]  # branches of each
CONV_BRANCHES = sum(n for n, _ in _CONV_KINDS)


def _spatial(rng: np.random.Generator, image_size: int) -> int:
    """A feature map's side: half the time one of the image's halvings, else log-uniform between them."""
    top = max(8, image_size)
    ladder = [s for s in (top // 2 ** k for k in range(6)) if s >= 4]
    if rng.uniform() < 0.5:
        return int(ladder[int(rng.integers(len(ladder)))])
    return _log_uniform(rng, 4, top)


_LADDER = [16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512, 768, 1024]  # powers of two and their halfway steps


def _width(rng: np.random.Generator) -> int:
    """A channel count: half the time a step of the ladder networks are designed on (kernels run best at such
    widths: on this project's VM, vgg16's 3x3 convolutions of 64-512 channels at 255-263 GFLOP/s, sampled ones
    of other widths at 88-245), else log-uniform between 8 and 1024 in multiples of 8."""
    if rng.uniform() < 0.5:
        return _LADDER[int(rng.integers(len(_LADDER)))]
    return _log_uniform(rng, 8, 1024, 8)


def _conv_config(rng: np.random.Generator, kind: str, image_size: int) -> tuple[int, int, int, int, int, int, str]:
    """(cin, cout, k, stride, groups, side, activation) of a ``kind`` of convolution, its FLOPs at batch 1 and
    its weight within the caps."""
    while True:
        side = _spatial(rng, image_size)
        stride = 2 if kind == "stem" or rng.uniform() < 0.25 else 1
        cin = 3 if kind == "stem" else _width(rng)
        if kind == "depthwise":
            k, cout, groups = (3 if rng.uniform() < 0.8 else 5), cin, cin
        else:
            k = {"dense3": 3, "pointwise": 1, "wide": int(rng.choice([5, 7])),
                 "stem": int(rng.choice([3, 7]))}[kind]
            cout, groups = _width(rng), 1
        out_side = (side + 2 * (k // 2) - k) // stride + 1
        flops = 2 * cout * out_side * out_side * (cin // groups) * k * k
        if out_side >= 1 and flops <= CONV_FLOPS and cout * (cin // groups) * k * k <= MAX_WEIGHT and \
                max(cin * side * side, cout * out_side * out_side) <= MAX_ACTIVATION:
            break
    return cin, cout, k, stride, groups, side, _choice(rng, [(0.5, "Relu"), (0.25, "Clip"), (0.25, "")])


def _conv_branch(g: GraphBuilder, feed: _Feed, rng: np.random.Generator, i: int, kind: str, batch: int,
                 image_size: int) -> None:
    cin, cout, k, stride, groups, side, act = _conv_config(rng, kind, image_size)
    p = f"conv{i:03d}.{kind}"
    x = feed.tensor(f"{p}.input", [batch, cin, side, side])
    h = batchnorm(g, conv(g, x, f"{p}.conv", cin, cout, k, stride, groups), f"{p}.bn", cout)
    if act == "Relu":
        h = g.op("Relu", f"{p}.relu", h)
    elif act == "Clip":
        h = g.op("Clip", f"{p}.relu6", h, g.scalar(0.0), g.scalar(6.0))
    feed.sink(h)


def _pool_branch(g: GraphBuilder, feed: _Feed, rng: np.random.Generator, i: int, batch: int, image_size: int) -> None:
    p = f"pool{i:02d}"
    channels, side = _log_uniform(rng, 16, 1024, 8), _spatial(rng, image_size)
    while channels * side * side > MAX_ACTIVATION and side > 4:
        side = max(4, side // 2)
    x = feed.tensor(f"{p}.input", [batch, channels, side, side])
    kind = ("max", "avg", "global")[i % 3]  # each in turn
    if kind == "global":
        h = g.op("GlobalAveragePool", f"{p}.gap", x)
    else:
        k = int(rng.choice([2, 3]))
        pads = [k // 2] * 4 if k == 3 else [0] * 4
        op = "MaxPool" if kind == "max" else "AveragePool"
        h = g.op(op, f"{p}.{kind}", x, kernel_shape=[k, k], strides=[2, 2], pads=pads)
    feed.sink(h)


def build_conv_kernels(g: GraphBuilder, batch: int, image_size: int) -> None:
    """:data:`CONV_BRANCHES` convolution branches and :data:`POOL_BRANCHES` pooling ones."""
    rng, feed = _sampler(g), _Feed(g)
    for i, kind in enumerate(_quota(_CONV_KINDS)):
        _conv_branch(g, feed, rng, i, kind, batch, image_size)
    for i in range(POOL_BRANCHES):
        _pool_branch(g, feed, rng, i, batch, image_size)


# -- linear layers, attention and the transformer's elementwise work -----------------------------------

_DENSE_KINDS = [(20, "linear"), (4, "head"), (16, "gemm"), (16, "attention"), (10, "softmax"), (10, "layernorm"),
                (10, "skip_layernorm"), (12, "gelu_erf"), (12, "gelu_tanh"), (10, "elementwise"), (6, "transpose"),
                (4, "split"), (4, "embedding")]  # branches of each
_STD = 0.02
DENSE_BRANCHES = sum(n for n, _ in _DENSE_KINDS)


def _tokens(rng: np.random.Generator, seq_len: int) -> int:
    return _log_uniform(rng, 8, max(16, 2 * seq_len))


def _halved(s: int, fits: Callable[[int], bool]) -> int:
    """``s`` tokens halved until the branch ``fits`` with that many (or they are 8 or fewer)."""
    while not fits(s) and s > 8:
        s //= 2
    return s


def _features(rng: np.random.Generator, low: int = 64, high: int = 4096) -> int:
    return _log_uniform(rng, low, high, 64)


def _dense_branch(g: GraphBuilder, feed: _Feed, rng: np.random.Generator, i: int, kind: str, batch: int,
                  seq_len: int) -> None:
    p = f"dense{i:03d}.{kind}"
    s = _tokens(rng, seq_len)
    if kind in ("linear", "head"):
        while True:
            k = _features(rng)
            n = _features(rng, 8192, 51200) if kind == "head" else _features(rng)
            if 2 * s * k * n <= MAX_FLOPS and k * n <= (MAX_WEIGHT if kind == "head" else LAYER_WEIGHT) and \
                    s * max(k, n) <= MAX_ACTIVATION:
                break
            s = max(8, s // 2)
        x = feed.tensor(f"{p}.input", [batch, s, k])
        h = g.op("MatMul", f"{p}.matmul", x, g.normal(f"{p}.weight", [k, n], _STD))
        if kind == "linear":
            h = g.op("Add", f"{p}.bias_add", h, g.normal(f"{p}.bias", [n], _STD))
    elif kind == "gemm":
        while True:
            k, n = _features(rng, 64, 8192), _features(rng, 64, 8192)
            if k * n <= MAX_WEIGHT:
                break
        x = feed.tensor(f"{p}.input", [batch, k])
        w, b = g.normal(f"{p}.weight", [n, k], _STD), g.filled(f"{p}.bias", [n], 0.0)
        h = g.op("Gemm", f"{p}.gemm", x, w, b, transB=1)
        if i % 2:  # every other one with a ReLU (the runtime's FusedGemm)
            h = g.op("Relu", f"{p}.relu", h)
    elif kind == "attention":
        heads, d = int(rng.choice([4, 8, 12, 16])), int(rng.choice([32, 64, 128]))
        s = _halved(s, lambda t: 2 * heads * t * t * d <= MAX_FLOPS and heads * t * t <= MAX_ACTIVATION)
        q = feed.tensor(f"{p}.query", [batch, heads, s, d])
        if rng.uniform() < 0.5:  # scores: Q K^T
            key_t = feed.tensor(f"{p}.key_t", [batch, heads, d, s])
            h = g.op("MatMul", f"{p}.scores", q, key_t)
        else:  # context: probabilities times V
            probs = feed.tensor(f"{p}.probs", [batch, heads, s, s])
            h = g.op("MatMul", f"{p}.context", probs, q)
    elif kind == "softmax":
        heads = int(rng.choice([4, 8, 12, 16]))
        s = _halved(s, lambda t: heads * t * t <= MAX_ACTIVATION)
        x = feed.tensor(f"{p}.input", [batch, heads, s, s])
        h = g.op("Softmax", f"{p}.softmax", x, axis=3)
    elif kind in ("layernorm", "skip_layernorm", "gelu_erf", "gelu_tanh", "elementwise"):
        c = _features(rng, 128, 4096)
        while kind.startswith("gelu") and (2 * s * c * c > MAX_FLOPS or c * c > LAYER_WEIGHT):
            c = max(64, c // 2 // 64 * 64)
        s = _halved(s, lambda t: t * c <= MAX_ACTIVATION)
        x = feed.tensor(f"{p}.input", [batch, s, c])
        if kind in ("layernorm", "skip_layernorm"):
            if kind == "skip_layernorm":
                x = g.op("Add", f"{p}.residual_add", x, feed.tensor(f"{p}.residual", [batch, s, c]))
            gamma, beta = g.filled(f"{p}.weight", [c], 1.0), g.filled(f"{p}.bias", [c], 0.0)
            h = g.op_multi("LayerNormalization", f"{p}.ln", [x, gamma, beta], [f"{p}.ln"], axis=-1,
                           epsilon=1e-5)[0]
        elif kind.startswith("gelu"):  # after a linear layer, where the runtime fuses its bias in
            h = g.op("MatMul", f"{p}.matmul", x, g.normal(f"{p}.weight", [c, c], _STD))
            h = g.op("Add", f"{p}.bias_add", h, g.normal(f"{p}.bias", [c], _STD))
            h = (gelu_erf if kind == "gelu_erf" else gelu_tanh)(g, h, f"{p}.gelu")
            # and before the next one, as in a transformer's feed-forward block
            h = g.op("MatMul", f"{p}.next", h, g.normal(f"{p}.next_weight", [c, c], _STD))
        else:
            op = "Add" if i % 2 == 0 else "Mul"  # each in turn, with a whole tensor or a bias in turn
            other = feed.tensor(f"{p}.other", [batch, s, c]) if i % 4 < 2 else g.normal(f"{p}.bias", [c], _STD)
            h = g.op(op, f"{p}.{op.lower()}", x, other)
    elif kind == "transpose":
        heads, d = int(rng.choice([4, 8, 12, 16])), int(rng.choice([32, 64, 128]))
        s = _halved(s, lambda t: t * heads * d <= MAX_ACTIVATION)
        x = feed.tensor(f"{p}.input", [batch, s, heads, d])
        h = g.op("Transpose", f"{p}.transpose", x, perm=[0, 2, 1, 3])
        # then a Reshape, as attention has beside its transposes: a reduction right after would take it away
        h = g.op("Reshape", f"{p}.reshape", h, g.ints(batch, heads, s * d))
    elif kind == "split":
        c = _features(rng, 128, 2048)
        s = _halved(s, lambda t: 3 * t * c <= MAX_ACTIVATION)
        x = feed.tensor(f"{p}.input", [batch, s, 3 * c])
        parts = g.op_multi("Split", f"{p}.split", [x, g.ints(c, c, c)], [f"{p}.q", f"{p}.k", f"{p}.v"], axis=2)
        for part in parts:
            feed.sink(part)
        return
    else:  # embedding
        vocab, c = _log_uniform(rng, 512, 50000), _features(rng, 128, 1024)
        while vocab * c > LAYER_WEIGHT:
            vocab //= 2
        s = _halved(s, lambda t: t * c <= MAX_ACTIVATION)
        ids = feed.ids(f"{p}.ids", [batch, s])
        h = g.op("Gather", f"{p}.gather", g.normal(f"{p}.table", [vocab, c], _STD), ids)
    feed.sink(h)


def build_dense_kernels(g: GraphBuilder, batch: int, seq_len: int) -> None:
    """:data:`DENSE_BRANCHES` branches of a transformer's kernels."""
    rng, feed = _sampler(g), _Feed(g)
    for i, kind in enumerate(_quota(_DENSE_KINDS)):
        _dense_branch(g, feed, rng, i, kind, batch, seq_len)


# -- recurrent layers ----------------------------------------------------------------------------------


def _rnn_branch(g: GraphBuilder, feed: _Feed, rng: np.random.Generator, i: int, batch: int, seq_len: int) -> None:
    op = "LSTM" if rng.uniform() < 0.7 else "GRU"
    gates = 4 if op == "LSTM" else 3
    while True:
        din, hidden = _log_uniform(rng, 16, 1024, 8), _log_uniform(rng, 32, 1024, 8)
        steps = _log_uniform(rng, 4, max(8, seq_len))
        if 2 * gates * hidden * (din + hidden) * steps <= MAX_FLOPS:
            break
    p = f"rnn{i:03d}.{op.lower()}"
    bound = 1.0 / math.sqrt(hidden)
    x = feed.tensor(f"{p}.input", [steps, batch, din])
    w = g.uniform(f"{p}.W", [1, gates * hidden, din], bound)
    r = g.uniform(f"{p}.R", [1, gates * hidden, hidden], bound)
    b = g.uniform(f"{p}.B", [1, 2 * gates * hidden], bound)
    (y,) = g.op_multi(op, p, [x, w, r, b], [f"{p}.y"], hidden_size=hidden)
    feed.sink(y)


def build_rnn_kernels(g: GraphBuilder, batch: int, seq_len: int) -> None:
    """:data:`RNN_BRANCHES` LSTM and GRU layers."""
    rng, feed = _sampler(g), _Feed(g)
    for i in range(RNN_BRANCHES):
        _rnn_branch(g, feed, rng, i, batch, seq_len)

