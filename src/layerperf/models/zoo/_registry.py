"""The table of built-in models and the checking of build arguments."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from layerperf.errors import InputError
from layerperf.models.zoo._graph import GraphBuilder
from layerperf.models.zoo.kernels import (
    CONV_BRANCHES,
    DENSE_BRANCHES,
    POOL_BRANCHES,
    RNN_BRANCHES,
    build_conv_kernels,
    build_dense_kernels,
    build_rnn_kernels,
)
from layerperf.models.zoo.recurrent import build_lstm
from layerperf.models.zoo.transformers import BERT_BASE, GPT2_SMALL, build_bert_base, build_gpt2_small
from layerperf.models.zoo.vision import build_mobilenet_v2, build_resnet18, build_resnet50, build_vgg16

Builder = Callable[[GraphBuilder, int, int], None]  # (graph, batch, image_size or seq_len)

# Smallest image every vision model takes: VGG's five 2x2 max pools need at least 32 px.
MIN_IMAGE_SIZE = 32
MAX_IMAGE_SIZE = 4096
MAX_LSTM_SEQ = 1_000_000
MAX_SWEEP_SEQ = 4096


@dataclass(frozen=True)
class ModelSpec:
    """One zoo entry: how to build it and which size argument it uses, within which range."""

    name: str
    summary: str
    builder: Builder
    size_arg: Literal["image_size", "seq_len"]
    min_size: int
    max_size: int
    sweep: bool = False  # a kernel sweep (``kernels.py``): training data for ``predict``, not a model


def _vision(name: str, summary: str, builder: Builder) -> ModelSpec:
    return ModelSpec(name, summary, builder, "image_size", MIN_IMAGE_SIZE, MAX_IMAGE_SIZE)


def _text(name: str, summary: str, builder: Builder, max_seq: int) -> ModelSpec:
    return ModelSpec(name, summary, builder, "seq_len", 1, max_seq)


def _sweep(name: str, summary: str, builder: Builder, size_arg: Literal["image_size", "seq_len"]) -> ModelSpec:
    low, high = (MIN_IMAGE_SIZE, MAX_IMAGE_SIZE) if size_arg == "image_size" else (8, MAX_SWEEP_SEQ)
    return ModelSpec(name, summary, builder, size_arg, low, high, sweep=True)


MODELS: dict[str, ModelSpec] = {
    spec.name: spec
    for spec in (
        _vision("resnet18", "ResNet-18 ImageNet classifier (torchvision)", build_resnet18),
        _vision("resnet50", "ResNet-50 v1.5 ImageNet classifier (torchvision)", build_resnet50),
        _vision("mobilenet_v2", "MobileNetV2 1.0 ImageNet classifier (torchvision)", build_mobilenet_v2),
        _vision("vgg16", "VGG-16 ImageNet classifier without batch norm (torchvision)", build_vgg16),
        _text(
            "bert-base",
            "BERT-base encoder, 12 layers, hidden 768, 12 heads (no pooler)",
            build_bert_base,
            BERT_BASE.max_positions,
        ),
        _text(
            "gpt2-small",
            "GPT-2 small decoder, 12 layers, hidden 768, LM head tied to wte",
            build_gpt2_small,
            GPT2_SMALL.max_positions,
        ),
        _text(
            "lstm",
            "2-layer LSTM sequence classifier: 256 features -> hidden 512 -> 10 classes",
            build_lstm,
            MAX_LSTM_SEQ,
        ),
        _sweep("kernels-conv", f"kernel sweep for predict: {CONV_BRANCHES} sampled convolutions (dense, pointwise, "
               f"depthwise, wide, stems) and {POOL_BRANCHES} poolings, each a branch of its own",
               build_conv_kernels, "image_size"),
        _sweep("kernels-dense", f"kernel sweep for predict: {DENSE_BRANCHES} sampled linear, attention, "
               "normalisation, GELU and elementwise kernels, each a branch of its own", build_dense_kernels,
               "seq_len"),
        _sweep("kernels-rnn", f"kernel sweep for predict: {RNN_BRANCHES} sampled LSTM and GRU layers, each a "
               "branch of its own", build_rnn_kernels, "seq_len"),
    )
}


def is_sweep(name: object) -> bool:
    """Whether ``name`` is a built-in kernel sweep."""
    spec = MODELS.get(name) if isinstance(name, str) else None
    return spec is not None and spec.sweep


def lookup(name: str) -> ModelSpec:
    """The spec for ``name``, or InputError listing the known names."""
    spec = MODELS.get(name) if isinstance(name, str) else None
    if spec is None:
        raise InputError(f"unknown model '{name}'", hint="known models: " + ", ".join(sorted(MODELS)))
    return spec


def ignored_size(name: str, image_size: int | None, seq_len: int | None) -> str | None:
    """The warning for a size option the built-in model ``name`` has no use for (``--seq-len`` on an image
    model), or None (not a built-in model, or nothing ignored)."""
    spec = MODELS.get(name)
    if spec is None:
        return None
    options = (("image_size", "--image-size", image_size), ("seq_len", "--seq-len", seq_len))
    given = [flag for arg, flag, value in options if value is not None and arg != spec.size_arg]
    if not given:
        return None
    kind = "an image model" if spec.size_arg == "image_size" else "a text model"
    own = "--image-size" if spec.size_arg == "image_size" else "--seq-len"
    return f"{given[0]} does not apply to {name} ({kind}, sized by {own}): ignored"


def _check_int(arg: str, value: object, lowest: int, highest: int | None = None) -> int:
    # bool is an int subclass, but batch=True is a mistake rather than batch=1.
    if not isinstance(value, int) or isinstance(value, bool):
        raise InputError(f"{arg} must be an integer, got {value!r}")
    if value < lowest or (highest is not None and value > highest):
        limit = f"between {lowest} and {highest}" if highest is not None else f"at least {lowest}"
        raise InputError(f"{arg} must be {limit}, got {value}")
    return value


def check_args(spec: ModelSpec, batch: object, image_size: object, seq_len: object, seed: object) -> int:
    """Validate the build arguments and return the size the model uses (image_size or seq_len)."""
    _check_int("batch", batch, 1)
    _check_int("seed", seed, 0)
    sizes = {"image_size": image_size, "seq_len": seq_len}
    for arg, value in sizes.items():
        if arg != spec.size_arg:
            _check_int(arg, value, 1)  # ignored by this model, but still has to make sense
    return _check_int(f"{spec.size_arg} for {spec.name}", sizes[spec.size_arg], spec.min_size, spec.max_size)
