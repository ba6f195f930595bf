"""Built-in model zoo: exact, randomly initialised ONNX models of well-known architectures, and the kernel
sweeps the predictor trains on (:mod:`layerperf.models.zoo.kernels`).

Every model is written directly with ``onnx.helper`` (no PyTorch, no downloads), with fixed
input shapes and float32 weights drawn from ``numpy.random.default_rng(seed)``, so the same
arguments always give byte-identical models. Compute matches the published architectures
(e.g. ResNet-50 at 224 px: 4.1 GMACs), which is what profiling needs; the weights are untrained.

>>> from layerperf import zoo
>>> zoo.names()[:2]
['bert-base', 'gpt2-small']
"""

from __future__ import annotations

import functools
from pathlib import Path

from onnx import ModelProto

from layerperf.models.zoo._cache import BUILDER_VERSION, cache_dir, cache_file, write_atomic
from layerperf.models.zoo._graph import GraphBuilder
from layerperf.models.zoo._registry import MODELS, ModelSpec, check_args, ignored_size, is_sweep, lookup

__all__ = ["BUILDER_VERSION", "build", "cache_dir", "describe", "ignored_size", "is_sweep", "names", "path"]

DEFAULT_BATCH = 1
DEFAULT_IMAGE_SIZE = 224
DEFAULT_SEQ_LEN = 128


def names() -> list[str]:
    """Names of the built-in models, sorted."""
    return sorted(MODELS)


@functools.cache
def describe(name: str) -> str:
    """One line on ``name``: what it is, its default input shape(s) and its parameter count.

    Raises InputError for an unknown name. Cheap: it walks the architecture without making weights.
    """
    spec = lookup(name)
    size = DEFAULT_IMAGE_SIZE if spec.size_arg == "image_size" else DEFAULT_SEQ_LEN
    g = GraphBuilder(name, seed=0, materialize=False)
    spec.builder(g, DEFAULT_BATCH, size)
    inputs = ", ".join(f"{n} {dtype}{list(shape)}" for n, dtype, shape in g.input_specs)
    return f"{name}: {spec.summary}; input {inputs}; {g.param_count / 1e6:.1f}M params ({g.param_count:,})"


def _build(spec: ModelSpec, batch: int, size: int, seed: int) -> ModelProto:
    g = GraphBuilder(spec.name, seed)
    spec.builder(g, batch, size)
    doc = f"layerperf zoo {spec.name} v{BUILDER_VERSION}: {spec.summary}; random weights, seed {seed}"
    return g.model(doc)


def build(
    name: str,
    *,
    batch: int = DEFAULT_BATCH,
    image_size: int = DEFAULT_IMAGE_SIZE,
    seq_len: int = DEFAULT_SEQ_LEN,
    seed: int = 0,
) -> ModelProto:
    """Build model ``name`` in memory with fixed input shapes.

    ``image_size`` (square, >= 32) applies to the image models and ``seq_len`` to the text and
    recurrent ones; the other is ignored. Raises InputError for an unknown name or bad arguments.
    """
    spec = lookup(name)
    size = check_args(spec, batch, image_size, seq_len, seed)
    return _build(spec, batch, size, seed)


def path(
    name: str,
    *,
    batch: int = DEFAULT_BATCH,
    image_size: int = DEFAULT_IMAGE_SIZE,
    seq_len: int = DEFAULT_SEQ_LEN,
    seed: int = 0,
) -> Path:
    """Path of the cached ``.onnx`` file for ``build(name, ...)``, building and saving it first if needed.

    Files live in ``$LAYERPERF_CACHE/zoo`` (default ``~/.cache/layerperf/zoo``); the file name encodes
    the model, its arguments and the builder version, and files are written atomically.
    """
    spec = lookup(name)
    size = check_args(spec, batch, image_size, seq_len, seed)
    target = cache_file(name, batch, spec.size_arg, size, seed)
    if not target.is_file():
        write_atomic(target, _build(spec, batch, size, seed).SerializeToString())
    return target
