"""An ONNX Runtime session over a one-node model, bound once so that a call is just the kernel.

Inputs are bound as OrtValues made once from the feed, and outputs to the OrtValues the first run
allocated, so a timed call (``run_with_iobinding``) allocates nothing and copies nothing in Python.
The first run is profiled by ONNX Runtime: that tells which kernels really ran (an optimization
level can turn one Conv into ReorderInput + NCHWc Conv + ReorderOutput) and on which provider.
Profiling ends before any timed call.
"""

from __future__ import annotations

import json
import re
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import onnxruntime as ort

from layerperf.backends.ort.measure import ProfileOptions
from layerperf.backends.ort.measure import session_options as ort_session_options
from layerperf.bench.build import OneNode, first_line
from layerperf.data.tensor import TensorInfo
from layerperf.errors import InputError
from layerperf.models.inputs import ort_type_to_numpy
from layerperf.readers.ort import split_runs


@dataclass(frozen=True, slots=True)
class Kernel:
    """One node ONNX Runtime executed for the model."""

    name: str
    op_type: str
    provider: str


@dataclass(frozen=True, slots=True)
class Prepared:
    """A session ready to time: ``call()`` runs the model once on the bound tensors."""

    call: Callable[[], None]
    outputs: tuple[TensorInfo, ...]  # as the first run produced them
    kernels: tuple[Kernel, ...]
    keep: tuple[Any, ...]  # the session, binding and OrtValues the call relies on


def session_options(threads: int, opt_level: str, profile_prefix: Path | None = None) -> ort.SessionOptions:
    """`layerperf profile`'s session options, for a one-node model run sequentially."""
    so = ort_session_options(ProfileOptions(threads=threads, opt_level=opt_level), profile_prefix=profile_prefix)
    so.inter_op_num_threads = 1  # one node: nothing runs in parallel across nodes
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    return so


def _what(one: OneNode) -> str:
    return f"{one.domain + '.' if one.domain else ''}{one.op_type}"


def _kernels(trace_path: str) -> tuple[Kernel, ...]:
    path = Path(trace_path)
    try:
        events = json.loads(path.read_text())
    finally:
        path.unlink(missing_ok=True)
    runs = split_runs(events)
    nodes = runs[0].nodes if runs else []
    return tuple(Kernel(n.name, n.op_type, n.provider) for n in nodes)


def _buffer(t: TensorInfo) -> ort.OrtValue | None:
    try:
        dtype = np.dtype(t.dtype)
    except TypeError:
        return None
    if dtype.kind not in "biufc" or t.shape is None or not t.is_static:
        return None
    return ort.OrtValue.ortvalue_from_shape_and_type([int(d) for d in t.shape], dtype)


def prepare(one: OneNode, *, threads: int, opt_level: str, provider: str) -> Prepared:
    """Create the session, bind the tensors and run once; ONNX Runtime's refusals become InputError."""
    with tempfile.TemporaryDirectory(prefix="layerperf-bench-") as tmp:
        so = session_options(threads, opt_level, Path(tmp) / "first_run")
        try:
            sess = ort.InferenceSession(one.model.SerializeToString(), so, providers=[provider])
        except Exception as exc:  # ORT raises its own pybind types; any of them means "cannot build"
            reason = first_line(exc)
            missing = re.search(r"Could not find an implementation for \w+\((\d+)\)", reason)
            hint = (f"it may implement an older version of the op: pass --opset {int(missing.group(1)) - 1} or lower"
                    if missing else None)
            raise InputError(f"ONNX Runtime cannot build {_what(one)} with these inputs: {reason}",
                             hint=hint) from None
        values = {name: ort.OrtValue.ortvalue_from_numpy(arr) for name, arr in one.feed.items()}
        binding = sess.io_binding()
        for name, value in values.items():
            binding.bind_ortvalue_input(name, value)
        out_names = [o.name for o in sess.get_outputs()]
        for name in out_names:
            binding.bind_output(name, "cpu")
        quiet = ort.RunOptions()
        quiet.log_severity_level = 4  # a kernel's refusal becomes our InputError, not a log line too
        try:
            sess.run_with_iobinding(binding, quiet)
        except Exception as exc:
            raise InputError(f"ONNX Runtime cannot run {_what(one)} with these inputs: {first_line(exc)}") from None
        kernels = _kernels(sess.end_profiling())
    if not kernels:
        raise InputError(f"ONNX Runtime computed {_what(one)} away before running it (its inputs are constants)",
                         hint="give the data input with --input, or lower --opt-level")
    outputs = tuple(TensorInfo(name, tuple(v.shape()), ort_type_to_numpy(v.data_type()))
                    for name, v in zip(out_names, binding.get_outputs(), strict=True))
    # Buffers of our own, not the first run's: before 1.29, ONNX Runtime freed the OrtValues that
    # get_outputs() returned when their binding was cleared, and rebinding them crashed the process.
    produced = [_buffer(t) for t in outputs]
    binding.clear_binding_outputs()
    for name, value in zip(out_names, produced, strict=True):
        if value is None:  # strings and other non-numeric outputs: allocated by each run
            binding.bind_output(name, "cpu")
        else:
            binding.bind_ortvalue_output(name, value)  # later runs write into the same buffers
    run = sess.run_with_iobinding

    def call() -> None:
        run(binding)

    return Prepared(call=call, outputs=outputs, kernels=kernels,
                    keep=(sess, binding, values, produced, one.feed))
