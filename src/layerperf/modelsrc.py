"""Where a model comes from: an .onnx path or a built-in zoo name, validated before any run."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import onnx
from google.protobuf.message import DecodeError

from layerperf.errors import InputError


@dataclass(frozen=True, slots=True)
class ModelSource:
    name: str
    path: Path
    proto: onnx.ModelProto
    sha256: str
    zoo: bool

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "path": str(self.path), "sha256": self.sha256, "zoo": self.zoo}


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


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


def check(model: onnx.ModelProto, path: Path) -> None:
    try:
        onnx.checker.check_model(str(path) if model.ByteSize() > 1_900_000_000 else model, full_check=True)
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
        model = _parse(path)
        check(model, path)
        return ModelSource(path.stem, path.resolve(), model, _sha256(path), zoo=False)
    from layerperf import zoo

    zoo_path = zoo.path(str(spec), **zoo_options)  # raises InputError for an unknown name
    return ModelSource(str(spec), zoo_path, _parse(zoo_path), _sha256(zoo_path), zoo=True)


def _from_proto(model: onnx.ModelProto) -> ModelSource:
    import tempfile

    data = model.SerializeToString()
    digest = hashlib.sha256(data).hexdigest()
    path = Path(tempfile.gettempdir()) / f"layerperf-{digest[:16]}.onnx"
    if not path.exists():
        tmp = path.with_suffix(".tmp")
        tmp.write_bytes(data)
        tmp.replace(path)
    check(model, path)
    return ModelSource(model.graph.name or "model", path, model, digest, zoo=False)
