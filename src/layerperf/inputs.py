"""Model inputs: shapes from ``--shape`` and defaults, seeded random data, or an ``.npz`` file."""

from __future__ import annotations

import re
import zipfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnx

from layerperf.errors import InputError

_SHAPE_RE = re.compile(r"^([^=]+)=(\d+(?:x\d+)*)$")
# Defaults for symbolic dimensions no --shape names: a leading dim is the batch.
SEQ_DEFAULT = 128


@dataclass(frozen=True, slots=True)
class InputSpec:
    name: str
    shape: tuple[int | str | None, ...]
    dtype: str  # numpy name


def parse_shapes(items: Iterable[str]) -> dict[str, tuple[int, ...]]:
    """Parse ``NAME=1x3x224x224`` items; a malformed one raises InputError."""
    shapes: dict[str, tuple[int, ...]] = {}
    for item in items:
        m = _SHAPE_RE.match(item.strip())
        if not m:
            raise InputError(f"malformed --shape '{item}'", hint="expected NAME=DIMS such as input=1x3x224x224")
        shapes[m.group(1)] = tuple(int(d) for d in m.group(2).split("x"))
    return shapes


def ort_type_to_numpy(type_str: str) -> str:
    """'tensor(float)' -> 'float32' and so on."""
    inner = type_str.removeprefix("tensor(").removesuffix(")")
    return {"float": "float32", "double": "float64", "float16": "float16", "bool": "bool"}.get(inner, inner)


def _resolve_dim(spec: InputSpec, i: int, dim: int | str | None) -> int:
    if isinstance(dim, int) and dim >= 0:
        return dim
    label = str(dim or "")
    if i == 0 or label.lower() in {"n", "batch", "batch_size", "b"}:
        return 1
    if "seq" in label.lower() or "len" in label.lower():
        return SEQ_DEFAULT
    raise InputError(f"input '{spec.name}' has a symbolic dimension '{label}' with no default",
                     hint=f"set it with --shape {spec.name}=" + "x".join("N" for _ in spec.shape))


def check_names(specs: Sequence[InputSpec], given: Mapping[str, object]) -> None:
    names = {s.name for s in specs}
    for name in given:
        if name not in names:
            raise InputError(f"--shape names input '{name}', which the model does not have",
                             hint="model inputs: " + ", ".join(sorted(names)))


def resolve_shapes(specs: Sequence[InputSpec], given: Mapping[str, tuple[int, ...]]) -> dict[str, tuple[int, ...]]:
    check_names(specs, given)
    out: dict[str, tuple[int, ...]] = {}
    for spec in specs:
        if spec.name in given:
            if len(given[spec.name]) != len(spec.shape):
                raise InputError(f"--shape {spec.name} has {len(given[spec.name])} dims; the model's "
                                 f"input has {len(spec.shape)}")
            out[spec.name] = given[spec.name]
        else:
            out[spec.name] = tuple(_resolve_dim(spec, i, d) for i, d in enumerate(spec.shape))
    return out


def index_bounds(model: onnx.ModelProto) -> dict[str, int]:
    """Graph inputs used as Gather indices into an initializer table -> the table's size."""
    tables = {init.name: init.dims[0] for init in model.graph.initializer if init.dims}
    bounds: dict[str, int] = {}
    for node in model.graph.node:
        if node.op_type == "Gather" and len(node.input) == 2 and node.input[0] in tables:
            idx = node.input[1]
            bounds[idx] = min(bounds.get(idx, tables[node.input[0]]), tables[node.input[0]])
    return bounds


def random_inputs(specs: Sequence[InputSpec], shapes: Mapping[str, tuple[int, ...]],
                  bounds: Mapping[str, int], seed: int = 0) -> dict[str, np.ndarray]:
    """Seeded data: normal floats, token ids in range for embedding inputs, ones for masks."""
    rng = np.random.default_rng(seed)
    feed: dict[str, np.ndarray] = {}
    for spec in specs:
        shape, dtype = shapes[spec.name], np.dtype(spec.dtype)
        if dtype.kind == "f":
            feed[spec.name] = rng.standard_normal(shape).astype(dtype)
        elif dtype.kind in "iu" and "mask" in spec.name.lower():
            feed[spec.name] = np.ones(shape, dtype)
        elif dtype.kind in "iu":
            feed[spec.name] = rng.integers(0, bounds.get(spec.name, 1), size=shape).astype(dtype)
        elif dtype.kind == "b":
            feed[spec.name] = rng.random(shape) < 0.5
        else:
            raise InputError(f"cannot generate data for input '{spec.name}' of type {spec.dtype}",
                             hint="pass it with --inputs FILE.npz")
    return feed


def load_npz(path: Path, specs: Sequence[InputSpec]) -> dict[str, np.ndarray]:
    try:
        with np.load(path, allow_pickle=False) as npz:
            arrays = {k: npz[k] for k in npz.files}
    except FileNotFoundError:
        raise InputError(f"no such inputs file: {path}") from None
    except (OSError, ValueError, zipfile.BadZipFile) as exc:
        raise InputError(f"{path} is not a readable .npz file ({exc})") from None
    by_name = {s.name: s for s in specs}
    for name, arr in arrays.items():
        if name not in by_name:
            raise InputError(f"{path} holds '{name}', which is not a model input",
                             hint="model inputs: " + ", ".join(sorted(by_name)))
        if str(arr.dtype) != by_name[name].dtype:
            raise InputError(f"{path}: '{name}' is {arr.dtype}, the model expects {by_name[name].dtype}")
    return arrays


def make_feed(model: onnx.ModelProto, specs: Sequence[InputSpec], shapes: Iterable[str] = (),
              inputs_file: str | Path | None = None, seed: int = 0) -> dict[str, np.ndarray]:
    """The input feed for one run: arrays from ``inputs_file`` first, seeded random data for the rest."""
    given = load_npz(Path(inputs_file), specs) if inputs_file else {}
    parsed = parse_shapes(shapes)
    check_names(specs, parsed)
    rest = [s for s in specs if s.name not in given]
    resolved = resolve_shapes(rest, {k: v for k, v in parsed.items() if k not in given})
    return {**random_inputs(rest, resolved, index_bounds(model), seed), **given}
