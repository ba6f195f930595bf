"""Model inputs: shapes from ``--shape`` and defaults, seeded random data, or an ``.npz`` file."""

from __future__ import annotations

import re
import zipfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnx

from layerperf.data.tensor import ML_DTYPES, lacks_numpy, numpy_dtype, onnx_elem_to_dtype, onnx_type_name_to_dtype
from layerperf.errors import InputError

_NON_TENSOR = ("seq(", "map(", "optional(", "sparse_tensor(")
_SHAPE_RE = re.compile(r"^([^=]+)=(\d+(?:x\d+)*)$")
# Defaults for symbolic dimensions no --shape names: a leading dim is the batch.
SEQ_DEFAULT = 128
_WORDS = np.array(["a", "b", "layer", "perf", "onnx", "0", "1", "x y", ""])


@dataclass(frozen=True, slots=True)
class InputSpec:
    name: str
    shape: tuple[int | str | None, ...]
    dtype: str  # numpy name


def onnx_input_specs(model: onnx.ModelProto) -> list[InputSpec]:
    """The inputs ``model``'s graph is fed (initializers left out), as its graph declares them:
    symbolic dims by name, unknown ones None."""
    inits = {i.name for i in model.graph.initializer}
    specs = []
    for vi in model.graph.input:
        if vi.name in inits:
            continue
        tt = vi.type.tensor_type
        dims = tuple(d.dim_value if d.HasField("dim_value") else (d.dim_param or None) for d in tt.shape.dim)
        specs.append(InputSpec(vi.name, dims, onnx_elem_to_dtype(tt.elem_type)))
    return specs


def parse_shapes(items: Iterable[str]) -> dict[str, tuple[int, ...]]:
    """Parse ``NAME=1x3x224x224`` items; a malformed one, or one with a dimension below 1, raises InputError."""
    shapes: dict[str, tuple[int, ...]] = {}
    for item in items:
        m = _SHAPE_RE.match(item.strip())
        if not m:
            raise InputError(f"malformed --shape '{item}'", hint="expected NAME=DIMS such as input=1x3x224x224")
        dims = tuple(int(d) for d in m.group(2).split("x"))
        if 0 in dims:  # (a negative one is malformed above)
            raise InputError(f"--shape '{item}' has a zero dimension: there would be no data to run",
                             hint="every dimension is 1 or more, such as input=1x3x224x224")
        shapes[m.group(1)] = dims
    return shapes


def ort_type_to_numpy(type_str: str) -> str:
    """'tensor(float)' -> 'float32', 'tensor(bfloat16)' -> 'bfloat16', for every ONNX element type.

    An optional tensor is fed a tensor: 'optional(tensor(int64))' -> 'int64'. The other kinds
    ('seq(tensor(float))', 'map(int64,tensor(float))', 'optional(seq(...))') are returned as they
    are: :func:`is_tensor_kind` tells them apart.
    """
    inner = type_str.removeprefix("optional(").removesuffix(")") if type_str.startswith("optional(tensor(") \
        else type_str
    if inner.startswith("tensor(") and inner.endswith(")"):
        return onnx_type_name_to_dtype(inner[len("tensor("):-1])
    return type_str


def is_tensor_kind(dtype: str) -> bool:
    """Whether an InputSpec's dtype is a tensor's (not a sequence, map or optional sequence)."""
    return not dtype.startswith(_NON_TENSOR)


def _refuse_kind(name: str, dtype: str) -> InputError:
    what = "map" if dtype.startswith("map(") else "sequence"
    return InputError(f"input '{name}' is a {dtype}; layerperf feeds tensors only, generated or from --inputs",
                      hint=f"give the model tensor inputs and build the {what} inside the graph"
                           + (" with SequenceConstruct" if what == "sequence" else ""))


def _resolve_dim(spec: InputSpec, i: int, dim: int | str | None, bound: Mapping[str, int]) -> int:
    if isinstance(dim, int) and dim >= 0:
        return dim
    label = str(dim or "")
    if label in bound:  # the same symbol in an input whose shape was given: the same size
        return bound[label]
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


def bound_symbols(specs: Sequence[InputSpec], given: Mapping[str, tuple[int, ...]]) -> dict[str, int]:
    """Symbolic dimensions (``batch``, ``sequence``...) sized by the inputs whose shapes were given."""
    bound: dict[str, int] = {}
    for spec in specs:
        if spec.name in given and len(given[spec.name]) == len(spec.shape):
            for dim, size in zip(spec.shape, given[spec.name], strict=True):
                if isinstance(dim, str) and dim:
                    bound.setdefault(dim, size)
    return bound


def resolve_shapes(specs: Sequence[InputSpec], given: Mapping[str, tuple[int, ...]],
                   bound: Mapping[str, int] | None = None) -> dict[str, tuple[int, ...]]:
    """Shapes of ``specs``: as given, else their symbolic dimensions sized as a given input sized the
    same symbol (``bound``; by default those of ``given``), else by the defaults."""
    check_names(specs, given)
    bound = bound_symbols(specs, given) if bound is None else bound
    out: dict[str, tuple[int, ...]] = {}
    for spec in specs:
        if spec.name in given:
            if len(given[spec.name]) != len(spec.shape):
                raise InputError(f"--shape {spec.name} has {len(given[spec.name])} dims; the model's "
                                 f"input has {len(spec.shape)}")
            out[spec.name] = given[spec.name]
        else:
            out[spec.name] = tuple(_resolve_dim(spec, i, d, bound) for i, d in enumerate(spec.shape))
    return out


def batch_shapes(model: onnx.ModelProto, batch: int) -> tuple[str, ...]:
    """``NAME=DIMS`` items (as ``--shape`` takes them) giving every input whose leading dimension is free
    (symbolic or unknown) that leading dimension ``batch``, its other free dimensions their defaults;
    none where no input has a free leading dimension (the model's batch is fixed)."""
    specs = [s for s in onnx_input_specs(model) if s.shape and not isinstance(s.shape[0], int)]
    bound = {str(s.shape[0]): batch for s in specs if s.shape[0]}
    shapes = resolve_shapes(specs, {}, bound)
    return tuple(f"{s.name}=" + "x".join(map(str, (batch, *shapes[s.name][1:]))) for s in specs)


def index_bounds(model: onnx.ModelProto) -> dict[str, int]:
    """Graph inputs used as Gather indices into an initializer table -> the table's size."""
    tables = {init.name: init.dims[0] for init in model.graph.initializer if init.dims}
    bounds: dict[str, int] = {}
    for node in model.graph.node:
        if node.op_type == "Gather" and len(node.input) == 2 and node.input[0] in tables:
            idx = node.input[1]
            bounds[idx] = min(bounds.get(idx, tables[node.input[0]]), tables[node.input[0]])
    return bounds


def _kind(dtype: np.dtype) -> str:
    """numpy's kind letter, with ml_dtypes' floats as "f" and its 4- and 2-bit integers as "i"."""
    if not lacks_numpy(dtype):
        return dtype.kind
    import ml_dtypes  # registered these types with numpy: importable whenever one is met

    try:
        ml_dtypes.finfo(dtype)
        return "f"
    except ValueError:
        return "i"


def _needs_ml_dtypes(dtype: str) -> InputError:
    return InputError(f"numpy has no {dtype}: layerperf makes and reads {dtype} tensors with ml_dtypes, "
                      "which is not installed", hint="pip install ml_dtypes")


def _finfo_min(dtype: np.dtype) -> float:
    import ml_dtypes

    return float(ml_dtypes.finfo(dtype).min)


def _random_array(spec: InputSpec, shape: tuple[int, ...], bound: int | None,
                  rng: np.random.Generator) -> np.ndarray:
    if spec.dtype == "string":
        return np.asarray(rng.choice(_WORDS, size=shape))
    dtype = numpy_dtype(spec.dtype)
    kind = "?" if dtype is None else _kind(dtype)
    if dtype is None and spec.dtype in ML_DTYPES:
        raise _needs_ml_dtypes(spec.dtype)
    if dtype is None or kind not in "fcbiu":
        raise InputError(f"cannot generate data for input '{spec.name}' of type {spec.dtype}",
                         hint="pass it with --inputs FILE.npz")
    if kind == "f":
        values = rng.standard_normal(shape)
        if lacks_numpy(dtype) and _finfo_min(dtype) >= 0:
            values = np.abs(values)  # float8_e8m0fnu has no sign: a negative value would be NaN
        return np.asarray(values).astype(dtype)
    if kind == "c":
        return np.asarray(rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dtype)
    if kind == "b":
        return np.asarray(rng.random(shape) < 0.5)
    if "mask" in spec.name.lower():
        return np.ones(shape, dtype)
    return np.asarray(rng.integers(0, bound or 1, size=shape)).astype(dtype)


def random_inputs(specs: Sequence[InputSpec], shapes: Mapping[str, tuple[int, ...]],
                  bounds: Mapping[str, int], seed: int = 0) -> dict[str, np.ndarray]:
    """Seeded data: normal floats, token ids in range for embedding inputs, ones for masks, short strings."""
    rng = np.random.default_rng(seed)
    feed: dict[str, np.ndarray] = {}
    for spec in specs:
        if not is_tensor_kind(spec.dtype):
            raise _refuse_kind(spec.name, spec.dtype)
        feed[spec.name] = _random_array(spec, shapes[spec.name], bounds.get(spec.name), rng)
    return feed


def _read_npz(path: Path) -> dict[str, np.ndarray]:
    try:
        with path.open("rb") as f:
            magic = f.read(4)
    except FileNotFoundError:
        raise InputError(f"no such inputs file: {path}") from None
    except OSError as exc:
        raise InputError(f"cannot read {path}: {exc.strerror}") from None
    if magic != b"PK\x03\x04":  # numpy would take any other file for a pickle and say so
        raise InputError(f"{path} is not an .npz file (a zip archive of arrays)",
                         hint="save the inputs with numpy.savez(path, name=array, ...)")
    try:
        with np.load(path, allow_pickle=False) as npz:
            return {k: npz[k] for k in npz.files}
    except FileNotFoundError:
        raise InputError(f"no such inputs file: {path}") from None
    except (OSError, ValueError, zipfile.BadZipFile) as exc:
        raise InputError(f"{path} is not a readable .npz file ({exc})") from None


def _as_model_takes(path: Path, name: str, arr: np.ndarray, dtype: str) -> np.ndarray:
    """``arr`` as the element type the model takes, or an InputError saying what the .npz should hold."""
    if str(arr.dtype) == dtype:
        return arr
    if dtype == "string" and arr.dtype.kind in "US":
        return arr.astype(str)
    want = numpy_dtype(dtype)
    if want is None and dtype in ML_DTYPES:
        raise _needs_ml_dtypes(dtype)
    if want is not None and lacks_numpy(want):
        if _kind(want) == "i" and arr.dtype.kind in "iu":
            import ml_dtypes

            info = ml_dtypes.iinfo(want)
            if arr.size == 0 or (int(arr.min()) >= int(info.min) and int(arr.max()) <= int(info.max)):
                return arr.astype(want)
            raise InputError(f"{path}: '{name}' holds values outside {dtype}'s range {info.min}..{info.max}")
        if arr.dtype.kind in "uV" and arr.dtype.itemsize == want.itemsize:
            return arr.view(want)  # the raw bits, as numpy has no such type
        raise InputError(f"{path}: '{name}' is {arr.dtype}, the model expects {dtype}",
                         hint=_bits_hint(dtype, want))
    hint = "store strings as a unicode array (dtype <U...)" if dtype == "string" else None
    raise InputError(f"{path}: '{name}' is {arr.dtype}, the model expects {dtype}", hint=hint)


def _bits_hint(dtype: str, want: np.dtype) -> str:
    if _kind(want) == "i":
        return f"numpy has no {dtype}: store the values as int8 or uint8, one per element"
    return (f"numpy has no {dtype}: store its raw bits as uint{8 * want.itemsize}, "
            f"e.g. arr.astype(ml_dtypes.{dtype}).view(np.uint{8 * want.itemsize})")


def load_npz(path: Path, specs: Sequence[InputSpec]) -> dict[str, np.ndarray]:
    """The arrays of ``path`` by input name, each as the element type its input takes."""
    arrays = _read_npz(path)
    by_name = {s.name: s for s in specs}
    for name, arr in arrays.items():
        if name not in by_name:
            raise InputError(f"{path} holds '{name}', which is not a model input",
                             hint="model inputs: " + ", ".join(sorted(by_name)))
        if not is_tensor_kind(by_name[name].dtype):
            raise _refuse_kind(name, by_name[name].dtype)
        arrays[name] = _as_model_takes(path, name, arr, by_name[name].dtype)
    return arrays


def make_feed(model: onnx.ModelProto, specs: Sequence[InputSpec], shapes: Iterable[str] = (),
              inputs_file: str | Path | None = None, seed: int = 0) -> dict[str, np.ndarray]:
    """The input feed for one run: arrays from ``inputs_file`` first, seeded random data for the rest."""
    given = load_npz(Path(inputs_file), specs) if inputs_file else {}
    parsed = parse_shapes(shapes)
    check_names(specs, parsed)
    rest = [s for s in specs if s.name not in given]
    sized = {**parsed, **{k: tuple(int(n) for n in a.shape) for k, a in given.items()}}
    resolved = resolve_shapes(rest, {k: v for k, v in parsed.items() if k not in given},
                              bound_symbols(specs, sized))
    return {**random_inputs(rest, resolved, index_bounds(model), seed), **given}
