"""Where a model comes from: an .onnx path or a built-in zoo name, validated before any run.

A model's weights are not read into Python: of the .onnx only the graph is parsed (weights kept
inside it are left there, see :mod:`layerperf.models.skeleton`), external data files are checked (inside
the model's directory, long enough) and hashed, and ONNX Runtime loads the weights itself from the
model's path.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import onnx
from google.protobuf.message import DecodeError

from layerperf.errors import InputError
from layerperf.models import extdata, zoo
from layerperf.models.skeleton import read_skeleton
from layerperf.util import atomic

# protobuf's limit on one serialized message: 2 GiB less one byte
MAX_PROTO_BYTES = (1 << 31) - 1


@dataclass(frozen=True, slots=True)
class ModelSource:
    """A model to profile. For a file or a zoo model, ``proto`` is its graph with the weights it
    keeps inside left in the file (external data pointing into ``path`` itself, see :func:`_graph`)."""

    name: str
    path: Path
    proto: onnx.ModelProto
    sha256: str
    zoo: bool
    data_files: tuple[extdata.DataFile, ...] = ()

    @property
    def data_dir(self) -> Path | None:
        """Where the external data ``proto`` reads lives (the model's own directory: its data files, or
        the .onnx itself for the weights kept inside), or None when it reads none."""
        return self.path.parent if self.data_files or extdata.external_tensors(self.proto) else None

    def describe(self) -> dict[str, Any]:
        """Name, path, SHA-256 of the .onnx file and, with external data, each data file's own."""
        d: dict[str, Any] = {"name": self.name, "path": str(self.path), "sha256": self.sha256, "zoo": self.zoo}
        if self.data_files:
            d["external_data"] = extdata.describe(self.data_files)
        return d


def _parse(path: Path) -> onnx.ModelProto:
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise InputError(f"cannot read {path}: {exc.strerror}") from exc
    if not data:
        raise InputError(f"{path} is empty, not an ONNX model")
    model = onnx.ModelProto()
    try:
        model.ParseFromString(data)
    except (DecodeError, RuntimeWarning, ValueError) as exc:
        raise InputError(f"{path} is not an ONNX model, or is truncated/corrupt ({exc})") from None
    if not model.graph.node and not model.opset_import:
        raise InputError(f"{path} is not an ONNX model (no graph and no opset)")
    return model


def _graph(path: Path) -> onnx.ModelProto:
    """The model without its large weights (see :mod:`layerperf.models.skeleton`): nothing here reads
    weight values, and ONNX Runtime reads them from the file itself."""
    try:
        model = read_skeleton(path)
    except (OSError, ValueError, DecodeError, RuntimeWarning):
        model = None
    if model is None or (not model.graph.node and not model.opset_import):
        return _parse(path)  # not a model: parsed whole, it gets its precise error message
    return model


def check(model: onnx.ModelProto, path: Path) -> None:
    # By path where the model has external data (so has the graph of a file with weights over 64 KiB
    # inside): the checker then looks for the data beside the model, not in the working directory.
    by_path = model.ByteSize() > 1_900_000_000 or bool(extdata.external_tensors(model))
    try:
        onnx.checker.check_model(str(path) if by_path else model, full_check=True)
    except (onnx.checker.ValidationError, onnx.shape_inference.InferenceError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise InputError(f"{path} fails the ONNX checker: {first}") from None


def open_model(spec: str | Path | onnx.ModelProto, **zoo_options: Any) -> ModelSource:
    """Resolve ``spec`` (a path, a zoo name, or an in-memory ModelProto) and validate the model."""
    if isinstance(spec, onnx.ModelProto):
        return _from_proto(spec)
    path = Path(spec)
    if path.suffix == ".onnx" or path.exists() or "/" in str(spec):
        if not path.exists():
            raise InputError(f"no such model file: {path}")
        if path.is_dir():
            raise InputError(f"{path} is a directory, not an ONNX model")
        # absolute, not resolved: ONNX Runtime looks for external data beside the path it is given
        path = path.absolute()
        model = _graph(path)
        files = _data_files(model, path)
        check(model, path)
        return ModelSource(path.stem, path, model, extdata.sha256(path), zoo=False, data_files=files)

    zoo_path = zoo.path(str(spec), **zoo_options)  # raises InputError for an unknown name
    return ModelSource(str(spec), zoo_path, _graph(zoo_path), extdata.sha256(zoo_path), zoo=True)


def _data_files(model: onnx.ModelProto, path: Path) -> tuple[extdata.DataFile, ...]:
    """The model's own external data files: not the .onnx itself, where its graph points for the weights
    it keeps inside (see :func:`_graph`)."""
    return tuple(f for f in extdata.data_files(model, path.parent, str(path)) if f.location != path.name)


def _from_proto(model: onnx.ModelProto) -> ModelSource:
    external = extdata.external_tensors(model)
    if external:  # its locations are relative to a directory the proto does not know
        raise InputError(f"the in-memory model's tensor '{external[0].name}' is in external data that was "
                         "not loaded", hint="pass the model's path, or load it with onnx.load(path)")
    if model.ByteSize() > MAX_PROTO_BYTES:
        raise InputError("the in-memory model is over 2 GB, more than one protobuf message can hold",
                         hint="save it with onnx.save(model, path, save_as_external_data=True) and pass the path")
    data = model.SerializeToString()
    digest = hashlib.sha256(data).hexdigest()
    # ONNX Runtime (and the counting worker, another process) load the model from a file: one of this
    # process's own, removed when the process exits rather than left in the temp directory for good.
    path = atomic.process_temp(data, f"layerperf-{digest[:16]}-", ".onnx")
    check(model, path)
    return ModelSource(model.graph.name or "model", path, model, digest, zoo=False)
