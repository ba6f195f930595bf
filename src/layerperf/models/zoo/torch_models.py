"""The zoo's architectures as PyTorch modules: the same layer names and the same weights as their ONNX form.

Each module mirrors its ONNX builder (:mod:`.vision`, :mod:`.transformers`) module by module — an
``Add`` module stands for a residual Add node, so ``layer1.0.add`` is a layer on both runtimes — and
takes its weights from the ONNX model's initializers by name, so the two compute the same function.
torch is imported only here, and only when a torch model is asked for.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch
from onnx import ModelProto, numpy_helper
from torch import nn

from layerperf.errors import InputError
from layerperf.models.zoo.transformers import BERT_BASE, MASK_VALUE
from layerperf.models.zoo.vision import NUM_CLASSES


class Add(nn.Module):
    """A residual addition, as a module so that it is a layer of its own (the ONNX form's Add node)."""

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return a + b


def _conv(cin: int, cout: int, k: int, stride: int = 1) -> nn.Conv2d:
    return nn.Conv2d(cin, cout, k, stride, k // 2, bias=False)


class BasicBlock(nn.Module):
    def __init__(self, cin: int, width: int, stride: int) -> None:
        super().__init__()
        self.conv1, self.bn1, self.relu1 = _conv(cin, width, 3, stride), nn.BatchNorm2d(width), nn.ReLU()
        self.conv2, self.bn2 = _conv(width, width, 3), nn.BatchNorm2d(width)
        self.downsample = (nn.Sequential(_conv(cin, width, 1, stride), nn.BatchNorm2d(width))
                           if stride != 1 or cin != width else None)
        self.add, self.relu2 = Add(), nn.ReLU()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.bn2(self.conv2(self.relu1(self.bn1(self.conv1(x)))))
        return self.relu2(self.add(h, x if self.downsample is None else self.downsample(x)))


class Bottleneck(nn.Module):
    def __init__(self, cin: int, width: int, stride: int) -> None:
        super().__init__()
        cout = width * 4
        self.conv1, self.bn1, self.relu1 = _conv(cin, width, 1), nn.BatchNorm2d(width), nn.ReLU()
        self.conv2, self.bn2, self.relu2 = _conv(width, width, 3, stride), nn.BatchNorm2d(width), nn.ReLU()
        self.conv3, self.bn3 = _conv(width, cout, 1), nn.BatchNorm2d(cout)
        self.downsample = (nn.Sequential(_conv(cin, cout, 1, stride), nn.BatchNorm2d(cout))
                           if stride != 1 or cin != cout else None)
        self.add, self.relu3 = Add(), nn.ReLU()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.relu1(self.bn1(self.conv1(x)))
        h = self.bn3(self.conv3(self.relu2(self.bn2(self.conv2(h)))))
        return self.relu3(self.add(h, x if self.downsample is None else self.downsample(x)))


class ResNet(nn.Module):
    def __init__(self, bottleneck: bool, depths: list[int]) -> None:
        super().__init__()
        self.conv1, self.bn1, self.relu = _conv(3, 64, 7, 2), nn.BatchNorm2d(64), nn.ReLU()
        self.maxpool = nn.MaxPool2d(3, 2, 1)
        block = Bottleneck if bottleneck else BasicBlock
        channels = 64
        for stage, (width, depth) in enumerate(zip([64, 128, 256, 512], depths, strict=True), start=1):
            blocks = []
            for i in range(depth):
                blocks.append(block(channels, width, 2 if stage > 1 and i == 0 else 1))
                channels = width * 4 if bottleneck else width
            self.add_module(f"layer{stage}", nn.Sequential(*blocks))
        self.layer1: nn.Module
        self.layer2: nn.Module
        self.layer3: nn.Module
        self.layer4: nn.Module
        self.avgpool, self.flatten = nn.AdaptiveAvgPool2d(1), nn.Flatten(1)
        self.fc = nn.Linear(channels, NUM_CLASSES)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        for stage in (self.layer1, self.layer2, self.layer3, self.layer4):
            x = stage(x)
        return self.fc(self.flatten(self.avgpool(x)))


# -- BERT-base (Hugging Face's module names) ---------------------------------------------------------


class SelfAttention(nn.Module):
    def __init__(self, hidden: int, heads: int) -> None:
        super().__init__()
        self.heads, self.head_dim = heads, hidden // heads
        self.query, self.key = nn.Linear(hidden, hidden), nn.Linear(hidden, hidden)
        self.value = nn.Linear(hidden, hidden)
        self.softmax = nn.Softmax(dim=-1)

    def _split(self, x: torch.Tensor) -> torch.Tensor:
        b, s, _ = x.shape
        return x.view(b, s, self.heads, self.head_dim).transpose(1, 2)

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        q, k, v = self._split(self.query(x)), self._split(self.key(x)), self._split(self.value(x))
        probs = self.softmax(q @ k.transpose(-1, -2) / math.sqrt(self.head_dim) + mask)
        context = (probs @ v).transpose(1, 2)
        return context.reshape(x.shape)


class DenseNorm(nn.Module):
    """Dense, residual Add, LayerNorm: BERT's ``*.output``."""

    def __init__(self, din: int, hidden: int, eps: float) -> None:
        super().__init__()
        self.dense, self.LayerNorm = nn.Linear(din, hidden), nn.LayerNorm(hidden, eps=eps)

    def forward(self, x: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
        return self.LayerNorm(self.dense(x) + residual)


class Attention(nn.Module):
    def __init__(self, hidden: int, heads: int, eps: float) -> None:
        super().__init__()
        self.self, self.output = SelfAttention(hidden, heads), DenseNorm(hidden, hidden, eps)

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return self.output(self.self(x, mask), x)


class Intermediate(nn.Module):
    def __init__(self, hidden: int, inner: int) -> None:
        super().__init__()
        self.dense, self.gelu = nn.Linear(hidden, inner), nn.GELU()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.gelu(self.dense(x))


class BertLayer(nn.Module):
    def __init__(self, hidden: int, heads: int, inner: int, eps: float) -> None:
        super().__init__()
        self.attention = Attention(hidden, heads, eps)
        self.intermediate, self.output = Intermediate(hidden, inner), DenseNorm(inner, hidden, eps)

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        attended = self.attention(x, mask)
        return self.output(self.intermediate(attended), attended)


class Embeddings(nn.Module):
    def __init__(self, seq: int, batch: int) -> None:
        super().__init__()
        cfg = BERT_BASE
        self.word_embeddings = nn.Embedding(cfg.vocab, cfg.hidden)
        self.position_embeddings = nn.Embedding(cfg.max_positions, cfg.hidden)
        self.token_type_embeddings = nn.Embedding(2, cfg.hidden)
        self.LayerNorm = nn.LayerNorm(cfg.hidden, eps=cfg.eps)
        self.register_buffer("position_ids", torch.arange(seq).reshape(1, seq))
        self.register_buffer("token_type_ids", torch.zeros((batch, seq), dtype=torch.int64))

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        h = self.word_embeddings(ids) + self.position_embeddings(self.position_ids)
        return self.LayerNorm(h + self.token_type_embeddings(self.token_type_ids))


class Encoder(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        cfg = BERT_BASE
        self.layer = nn.ModuleList(BertLayer(cfg.hidden, cfg.heads, cfg.intermediate, cfg.eps)
                                   for _ in range(cfg.layers))

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        for layer in self.layer:
            x = layer(x, mask)
        return x


class Bert(nn.Module):
    """BERT-base encoder without pooler: (input_ids, attention_mask) -> last_hidden_state."""

    def __init__(self, batch: int, seq: int) -> None:
        super().__init__()
        self.embeddings, self.encoder = Embeddings(seq, batch), Encoder()

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        mask = (1.0 - attention_mask[:, None, None, :].to(torch.float32)) * MASK_VALUE
        return self.encoder(self.embeddings(input_ids), mask)


def _input_dims(proto: ModelProto, name: str) -> tuple[int, ...]:
    vi = next(i for i in proto.graph.input if i.name == name)
    return tuple(d.dim_value for d in vi.type.tensor_type.shape.dim)


def _module(name: str, proto: ModelProto) -> nn.Module:
    if name in ("resnet18", "resnet50"):
        return ResNet(name == "resnet50", [2, 2, 2, 2] if name == "resnet18" else [3, 4, 6, 3])
    if name == "bert-base":
        batch, seq = _input_dims(proto, "input_ids")
        return Bert(batch, seq)
    raise InputError(f"built-in model '{name}' has no PyTorch form yet", hint="PyTorch forms: " + ", ".join(NAMES))


NAMES = ("bert-base", "resnet18", "resnet50")


def load_weights(module: nn.Module, proto: ModelProto, *, matmul_linear: bool = False) -> nn.Module:
    """Every parameter and buffer of ``module`` from the ONNX initializer of the same name; BatchNorm's
    step counter aside. ``matmul_linear``: the ONNX form writes nn.Linear as MatMul with an [in, out]
    weight, transposed here to nn.Linear's [out, in] (a Gemm with transB keeps torch's layout)."""
    inits = {i.name: i for i in proto.graph.initializer}
    linears = {f"{path}.weight" for path, m in module.named_modules() if isinstance(m, nn.Linear)}
    state = {}
    for key, value in module.state_dict().items():
        if key.endswith("num_batches_tracked"):
            state[key] = value
            continue
        arr = np.array(numpy_helper.to_array(inits[key]))
        if matmul_linear and key in linears:
            arr = arr.T
        state[key] = torch.from_numpy(np.ascontiguousarray(arr)).reshape(value.shape)
    module.load_state_dict(state)
    return module


def build_torch(name: str, proto: ModelProto) -> nn.Module:
    """Built-in model ``name`` as a PyTorch module in eval mode, with the weights of ``proto`` (its ONNX form)."""
    return load_weights(_module(name, proto), proto, matmul_linear=name == "bert-base").eval()


def example_inputs(proto: ModelProto, feed: dict[str, Any]) -> tuple[torch.Tensor, ...]:
    return tuple(torch.from_numpy(feed[i.name]) for i in proto.graph.input if i.name in feed)
