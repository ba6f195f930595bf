"""External data: the weights a model keeps in files beside its .onnx (``save_as_external_data``).

The .onnx names each such tensor's bytes by a location relative to its own directory, an offset
and a length. layerperf leaves those bytes to ONNX Runtime wherever only ONNX Runtime needs them:
sessions open the model by path, or from bytes with that directory named (:func:`use_folder`);
only ``bench --node`` reads weights into Python, those of its one node. A location must stay inside
the model's directory — no absolute path, no ``..``, no symbolic link leading out — as ONNX Runtime
and the onnx checker require too; a model that breaks this is refused before anything runs.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import os
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import onnx
from onnx import TensorProto

from layerperf.errors import InputError

# ONNX Runtime's session config entry naming the directory external data of a model given as bytes
# is relative to (without it, ORT resolves locations against the working directory).
FOLDER_KEY = "session.model_external_initializers_file_folder_path"


@dataclass(frozen=True, slots=True)
class DataFile:
    """One external data file: its location as the model writes it, where it is, its size."""

    location: str
    path: Path
    size_bytes: int


def _graph_tensors(graph: onnx.GraphProto) -> Iterator[TensorProto]:
    yield from graph.initializer
    for sparse in graph.sparse_initializer:
        yield sparse.values
        yield sparse.indices
    for node in graph.node:
        yield from _node_tensors(node)


def _node_tensors(node: onnx.NodeProto) -> Iterator[TensorProto]:
    for a in node.attribute:
        if a.HasField("t"):
            yield a.t
        yield from a.tensors
        if a.HasField("g"):
            yield from _graph_tensors(a.g)
        for g in a.graphs:
            yield from _graph_tensors(g)


def external_tensors(model: onnx.ModelProto) -> list[TensorProto]:
    """Every tensor of ``model`` (subgraphs and node attributes included) whose data is external."""
    found = [t for t in _graph_tensors(model.graph) if t.data_location == TensorProto.EXTERNAL]
    for f in model.functions:
        for node in f.node:
            found += [t for t in _node_tensors(node) if t.data_location == TensorProto.EXTERNAL]
    return found


def _fields(t: TensorProto) -> dict[str, str]:
    return {e.key: e.value for e in t.external_data}


def _int_field(t: TensorProto, fields: dict[str, str], key: str, label: str) -> int | None:
    if key not in fields:
        return None
    try:
        value = int(fields[key])
    except ValueError:
        value = -1
    if value < 0:
        raise InputError(f"{label}: tensor '{t.name}' has a bad external data {key} '{fields[key]}'")
    return value


def _inside(location: str, model_dir: Path, name: str, label: str) -> Path:
    """``model_dir / location``, refused when it is absolute or leads out of ``model_dir``."""
    where = f"{label}: tensor '{name}' keeps its data outside the model's directory"
    hint = "external data must be a file in the model's directory or below it"
    if os.path.isabs(location):
        raise InputError(f"{where}, at the absolute path {location}", hint=hint)
    path = model_dir / location
    root = os.path.realpath(model_dir)
    real = os.path.realpath(path)
    if os.path.commonpath([root, real]) != root:
        how = ("'..' leads out" if ".." in Path(os.path.normpath(location)).parts
               else f"a symbolic link leads out to {real}")
        raise InputError(f"{where}: {location} ({how})", hint=hint)
    return path


def _data_file(location: str, model_dir: Path, name: str, label: str) -> DataFile:
    path = _inside(location, model_dir, name, label)
    try:
        st = path.stat()
    except OSError:
        raise InputError(f"{label}: external data file {location} of tensor '{name}' is missing "
                         f"(looked in {model_dir})") from None
    if not path.is_file():
        raise InputError(f"{label}: external data {location} of tensor '{name}' is not a regular file")
    return DataFile(location, path, st.st_size)


def data_files(model: onnx.ModelProto, model_dir: Path, label: str) -> tuple[DataFile, ...]:
    """The external data files ``model`` reads, each checked to lie inside ``model_dir`` and to hold
    every byte range a tensor reads from it; InputError (one line) otherwise."""
    files: dict[str, DataFile] = {}
    for t in external_tensors(model):
        fields = _fields(t)
        location = fields.get("location", "")
        if not location:
            raise InputError(f"{label}: tensor '{t.name}' is marked external but names no location")
        if location not in files:
            files[location] = _data_file(location, model_dir, t.name, label)
        offset = _int_field(t, fields, "offset", label) or 0
        length = _int_field(t, fields, "length", label)
        end = offset + (length or 0)
        if end > files[location].size_bytes:
            raise InputError(f"{label}: tensor '{t.name}' reads bytes {offset}..{end} of {location}, "
                             f"which has {files[location].size_bytes} (truncated?)")
    return tuple(files.values())


def sha256(path: Path) -> str:
    """The file's SHA-256, read in 1 MiB pieces (a data file is never held in memory whole)."""
    h = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def describe(files: tuple[DataFile, ...]) -> list[dict[str, Any]]:
    """Each data file's location, size and SHA-256, for the profile's model metadata."""
    return [{"location": f.location, "bytes": f.size_bytes, "sha256": sha256(f.path)} for f in files]


def loaded(tensor: TensorProto, model_dir: Path) -> TensorProto:
    """A copy of ``tensor`` with its external bytes read in (the tensor itself when it has none)."""
    if tensor.data_location != TensorProto.EXTERNAL:
        return tensor
    fields = _fields(tensor)
    path = _inside(fields.get("location", ""), model_dir, tensor.name, str(model_dir))
    offset = int(fields.get("offset", "0") or 0)
    length = int(fields["length"]) if fields.get("length") else -1
    out = TensorProto()
    out.CopyFrom(tensor)
    with path.open("rb") as f:
        f.seek(offset)
        out.raw_data = f.read(length)
    del out.external_data[:]
    out.data_location = TensorProto.DEFAULT
    return out


def use_folder(options: Any, model_dir: Path | None) -> None:
    """Let a session built from bytes find external data in ``model_dir`` (where :func:`folder_key_works`)."""
    if model_dir is not None:
        options.add_session_config_entry(FOLDER_KEY, str(model_dir))


@functools.cache
def folder_key_works() -> bool:
    """Whether this ONNX Runtime honours :data:`FOLDER_KEY`; older releases (1.18 does not) look for
    the external data of a model given as bytes in the working directory whatever it says."""
    import numpy as np
    import onnxruntime as ort
    from onnx import helper, numpy_helper

    with tempfile.TemporaryDirectory(prefix="layerperf-ext-") as tmp:
        w = numpy_helper.from_array(np.ones(1, np.float32), "w")
        w.raw_data = b""
        w.data_location = TensorProto.EXTERNAL
        for key, value in (("location", "w.bin"), ("offset", "0"), ("length", "4")):
            entry = w.external_data.add()
            entry.key, entry.value = key, value
        (Path(tmp) / "w.bin").write_bytes(np.ones(1, np.float32).tobytes())
        y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])
        graph = helper.make_graph([helper.make_node("Identity", ["w"], ["y"])], "probe", [], [y], [w])
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)
        so = ort.SessionOptions()
        so.log_severity_level = 4
        use_folder(so, Path(tmp))
        try:
            ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
        except Exception:  # ORT's pybind exception types: the data was not found
            return False
    return True


@contextlib.contextmanager
def session_model(model: onnx.ModelProto, model_dir: Path | None, options: Any) -> Iterator[str | bytes]:
    """What to hand ``InferenceSession`` for ``model``, whose external data is in ``model_dir``.

    Its bytes, with ``model_dir`` named in ``options``; where this ONNX Runtime ignores that, a file
    in a temporary directory beside links to the data files (these older releases follow links).
    """
    if model_dir is None or folder_key_works() or not external_tensors(model):
        use_folder(options, model_dir)
        yield model.SerializeToString()
        return
    with tempfile.TemporaryDirectory(prefix="layerperf-ext-") as tmp:
        for f in data_files(model, model_dir, str(model_dir)):
            link = Path(tmp) / f.location
            link.parent.mkdir(parents=True, exist_ok=True)
            link.symlink_to(f.path.absolute())
        path = Path(tmp) / "model.onnx"
        while os.path.lexists(path):  # a link's name (the .onnx itself where it keeps weights inside):
            path = path.with_name("_" + path.name)  # writing through it would overwrite the user's file
        path.write_bytes(model.SerializeToString())
        yield str(path)
