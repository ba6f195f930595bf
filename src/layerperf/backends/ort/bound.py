"""Pre-bound node calls for the stepwise executor: every node's inputs and outputs bound once (IOBinding),
its outputs in buffers reused the way ONNX Runtime's arena reuses them in the real run.

Why: a plain stepwise call returns outputs that the node's own session allocated, each node's in a
session (and arena) of its own, so every output is written to memory last touched a whole pass ago,
and the Python call converts and checks its arguments on every call. The real run writes each output
into memory its arena just took back from a tensor that is no longer read, warm in the caches. Here
the buffers are planned once, after a first pass has shown every output's shape and type: a tensor
whose last reader has run gives its buffer back, and the next output that fits takes the buffer
given back last (the warmest). Then a call is one ``run_with_iobinding`` with nothing to convert.

Only when every runtime tensor is a plain numpy-typed tensor of a shape that repeats from pass to pass;
otherwise the executor keeps its plain calls.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import onnxruntime as ort
import onnxruntime.capi._pybind_state as ort_state

from layerperf.backends.ort.session import ORT_ERRORS, Session
from layerperf.data.tensor import lacks_numpy, numpy_dtype, onnx_type_name_to_dtype

ALIGN_BYTES = 64  # a cache line: what ONNX Runtime's CPU allocator aligns to


@dataclass(frozen=True, slots=True)
class TensorShape:
    """A runtime tensor as the first pass saw it."""

    shape: tuple[int, ...]
    dtype: np.dtype

    @property
    def nbytes(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64)) * self.dtype.itemsize


def seen(value: Any) -> TensorShape | None:
    """A C-level OrtValue's shape and numpy type; None where it is no tensor numpy holds."""
    if not value.is_tensor():
        return None
    inner = value.data_type()[len("tensor("):-1]
    dtype = numpy_dtype(onnx_type_name_to_dtype(inner))
    if dtype is None or lacks_numpy(dtype) or dtype.kind in "OUS":
        return None
    return TensorShape(tuple(int(d) for d in value.shape()), dtype)



# Kernels that may write their output over one of their inputs (input index by (domain, op type)): a
# convolution with a fused residual Sum (ONNX Runtime's NCHWc Conv, FusedConv's Z) adds into the Sum
# tensor in place in the real run when the Sum has no later reader, and copies it first into an output
# that lies elsewhere: bound apart, the stepwise call did that copy (resnet50's residual convolutions
# +10-20% at 56x56, 1 thread).
IN_PLACE_INPUTS = {("com.microsoft.nchwc", "Conv"): 3, ("com.microsoft", "FusedConv"): 3}


@dataclass(frozen=True, slots=True)
class Step:
    """What :func:`buffer_plan` needs of a stepwise step: the tensors it reads and writes, and the input
    whose memory its one output may share: a view op's data (:data:`layerperf.analysis.memory.live.ALIAS_OPS`:
    ONNX Runtime hands the output over in its input's memory, copying only into an output that lies
    elsewhere), or with ``in_place`` an input the kernel may overwrite (:data:`IN_PLACE_INPUTS`), shared
    only where this step reads it last."""

    inputs: Sequence[str]
    outputs: Sequence[str]
    alias_of: str | None = None
    in_place: bool = False


def buffer_plan(steps: Sequence[Step], sizes: Mapping[str, int], last_use: Mapping[str, int],
                keep: set[str]) -> tuple[dict[str, int], list[int]]:
    """Each output's buffer (an index) and each buffer's size in bytes.

    A buffer is free once the last reader (``last_use``) of every tensor in it has run, unless ``keep``
    holds one (a graph output); an output takes the buffer freed last among those large enough, else a
    new one; an aliasing step's output shares its input's buffer.
    """
    of: dict[str, int] = {}
    capacity: list[int] = []
    live: list[int] = []  # per buffer, the tensors in it still to be read
    free: list[int] = []  # most recently freed last

    def release(name: str) -> None:
        b = of[name]
        live[b] -= 1
        if live[b] == 0:
            free.append(b)

    for i, step in enumerate(steps):
        for name in step.outputs:
            source = step.alias_of
            if step.in_place and source is not None and (
                    last_use.get(source) != i or source in keep or source not in of or live[of[source]] != 1):
                # read again later, an output, or its buffer holds another tensor still to be read (a view's
                # input): the real run cannot write over it either
                source = None
            if source is not None and source in of and sizes[source] == sizes[name]:
                of[name] = of[source]
            else:
                fits = [b for b in free if capacity[b] >= sizes[name]]
                of[name] = fits[-1] if fits else len(capacity)
                if fits:
                    free.remove(fits[-1])
                else:
                    capacity.append(sizes[name])
                    live.append(0)
            live[of[name]] += 1
        for name in dict.fromkeys(step.inputs):
            if last_use.get(name) == i and name in of and name not in keep:
                release(name)
        for name in step.outputs:  # written, never read: gone at once
            if name not in last_use and name not in keep:
                release(name)
    return of, capacity


def _aligned(nbytes: int) -> np.ndarray:
    raw = np.empty(nbytes + ALIGN_BYTES, np.uint8)
    start = -raw.ctypes.data % ALIGN_BYTES
    return raw[start:start + nbytes]


def _view(buffer: np.ndarray, tensor: TensorShape) -> np.ndarray:
    if tensor.nbytes == 0:
        return np.empty(tensor.shape, tensor.dtype)
    return buffer[:tensor.nbytes].view(tensor.dtype).reshape(tensor.shape)


class BoundPass:
    """Every step of a stepwise pass bound to planned buffers; :meth:`call` runs step ``i``.

    Graph inputs are bound again at each pass (:meth:`feed`); everything else stays bound.
    """

    def __init__(self, sessions: Sequence[Session], steps: Sequence[Step], tensors: Mapping[str, TensorShape],
                 last_use: Mapping[str, int], keep: set[str]) -> None:
        of, capacity = buffer_plan(steps, {k: t.nbytes for k, t in tensors.items()}, last_use, keep)
        buffers = [_aligned(n) for n in capacity]
        self.arrays = {name: _view(buffers[b], tensors[name]) for name, b in of.items()}
        self._values = {name: ort.OrtValue.ortvalue_from_numpy(arr) for name, arr in self.arrays.items()}
        self._bindings = []
        self._runs: list[Callable[[], None]] = []
        self._fed: dict[str, list[Any]] = {}
        for sess, step in zip(sessions, steps, strict=True):
            binding = ort_state.SessionIOBinding(sess._sess)
            for name in step.inputs:
                if name in self._values:
                    binding.bind_ortvalue_input(name, self._values[name]._ortvalue)
                else:  # a graph input: bound at each pass
                    self._fed.setdefault(name, []).append(binding)
            for name in step.outputs:
                binding.bind_ortvalue_output(name, self._values[name]._ortvalue)
            self._bindings.append(binding)
            self._runs.append(_run(sess, binding))

    def feed(self, values: Mapping[str, Any]) -> None:
        """Bind this pass's graph inputs (C-level OrtValues, by name)."""
        for name, bindings in self._fed.items():
            for binding in bindings:
                binding.bind_ortvalue_input(name, values[name])

    def call(self, i: int) -> None:
        self._runs[i]()

    def output(self, name: str) -> ort.OrtValue:
        """A graph output, copied out of its buffer (the next pass writes the buffer again) into memory
        of ONNX Runtime's own, as a plain call's output is: an array read from it stays valid."""
        arr = self.arrays[name]
        value = ort.OrtValue.ortvalue_from_shape_and_type(list(arr.shape), arr.dtype)
        value.update_inplace(arr)
        return value


def _run(sess: Session, binding: Any) -> Callable[[], None]:
    run = sess._sess.run_with_iobinding
    options = sess.quiet._get_c_value() if hasattr(sess.quiet, "_get_c_value") else sess.quiet

    def call() -> None:
        try:
            run(binding, options)
        except ORT_ERRORS as exc:
            raise sess.failure(exc) from None

    return call
