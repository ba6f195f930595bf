"""What a backend is: the protocol every runtime driver implements, and the options all of them share.

A backend turns a model into a :class:`~layerperf.data.profile.Profile`: it loads or compiles the
model, runs warm-up and measured runs, drives the requested collectors (perf counters, resident
memory) at each layer's start and end, and fills the layers and runs. Everything after the Profile —
analysis, diff, renderers, files — is shared, so a backend knows nothing about outputs.

A backend module must import without its runtime (``import onnxruntime`` inside its functions), so
that listing backends and building the CLI stay fast and work where a runtime is missing.

A backend may also measure one operator, or one node of a model, in isolation: its optional
:class:`SingleOp` capability (``backend.single_op()``, None where it has none), which ``layerperf
bench``, ``layerperf calibrate`` and a dataset collector use through the registry.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from layerperf.errors import InputError
from layerperf.util.affinity import allowed_cpus

if TYPE_CHECKING:
    import numpy as np
    import onnx

    from layerperf.collectors import Collectors
    from layerperf.data.profile import Profile
    from layerperf.data.tensor import TensorInfo
    from layerperf.models.source import ModelSource


@dataclass(frozen=True, slots=True)
class Availability:
    """Whether a backend can run here: its runtime's version, or why not (and how to fix it)."""

    usable: bool
    version: str | None = None
    reason: str | None = None


def option(help: str, *, choices: tuple[str, ...] | None = None, flag: bool = True,
           parse: Callable[[str], Any] | None = None, metavar: str | None = None) -> dict[str, Any]:
    """Metadata of a backend option's dataclass field: its help text, its choices, and whether it is a
    CLI flag (``--opt-level`` for a field ``opt_level``; a bool field is a switch); ``parse`` reads the
    flag's text, ``metavar`` names its value in ``--help``."""
    return {"help": help, "choices": choices, "flag": flag, "parse": parse, "metavar": metavar}


def option_fields(options_type: type) -> list[dataclasses.Field[Any]]:
    """The fields of a backend's options dataclass."""
    return list(dataclasses.fields(options_type))


def flag_name(field_name: str) -> str:
    return "--" + field_name.replace("_", "-")


THREADS_PER_CPU = 16  # the most intra-op threads a run may ask for, per CPU this process may use (64 at least)


def max_threads() -> int:
    return max(64, THREADS_PER_CPU * len(allowed_cpus()))


@dataclass(frozen=True, slots=True)
class RunPlan:
    """The options every backend takes: how many runs, which inputs, the model's own options."""

    warmup: int = 10
    runs: int = 100
    threads: int = 0  # intra-op threads; 0 keeps the runtime's default
    shapes: tuple[str, ...] = ()  # NAME=DIMS
    inputs_file: str | None = None  # .npz of input arrays by name
    seed: int = 0
    latency: bool = True  # measure whole-model latency with the profiler off, interleaved
    zoo_options: dict[str, int] = field(default_factory=dict)  # batch, image_size, seq_len of a built-in model
    # Called between the measured runs, outside their timing (common.interleaved's ``between``): with 0
    # before the first, then with the profiled runs made so far. A backend passes it to the loop of its
    # timed runs only (not to counting or memory passes), so that the calls bracket Profile.runs in order.
    between_runs: Callable[[int], None] | None = field(default=None, compare=False, repr=False)

    def validate(self) -> None:
        if self.runs < 1:
            raise InputError(f"--runs must be at least 1, got {self.runs}")
        if self.warmup < 0:
            raise InputError(f"--warmup must be 0 or more, got {self.warmup}")
        if self.seed < 0:
            raise InputError(f"--seed must be 0 or more, got {self.seed}")
        if self.threads < 0:
            raise InputError(f"--threads must be 0 (runtime default) or more, got {self.threads}")
        if self.threads > (most := max_threads()):
            raise InputError(f"--threads {self.threads} is more than {most}: a runtime would start them all "
                             f"on the {len(allowed_cpus())} CPU(s) this process may use",
                             hint="oversubscribing a few times over is an experiment; thousands of threads hang")


class Backend(Protocol):
    """A runtime layerperf profiles on. See :mod:`layerperf.backends` for the registry."""

    name: ClassVar[str]  # what --backend takes, and what the Profile's metadata says
    summary: ClassVar[str]  # one line for `layerperf backends`
    model_suffixes: ClassVar[tuple[str, ...]]  # model files it is the default for, e.g. (".onnx",)
    options_type: ClassVar[type]  # a frozen dataclass; fields with option() metadata become CLI flags

    def availability(self) -> Availability:
        """Whether the runtime imports here, its version, or the reason it does not (cheap: no model)."""
        ...

    def profile(self, model: Any, plan: RunPlan, options: Any, collectors: Collectors) -> Profile:
        """Profile ``model`` (a path, a built-in model name or the runtime's own model object):
        ``options`` is an instance of ``options_type``. Raises LayerperfError subclasses for bad input."""
        ...

    def single_op(self) -> SingleOp | None:
        """Its single-operator capability, or None where it has none (cheap: builds nothing)."""
        ...


# -- the single-operator capability ----------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class Kernel:
    """One kernel a runtime executed for a one-node model (an optimization may run several)."""

    name: str
    op_type: str
    provider: str  # where it ran: an execution provider, a device, a library


@dataclass(frozen=True, slots=True)
class PreparedOp:
    """A one-node model built and bound by a runtime, run once: ``call()`` runs it again on the same
    inputs, and is all a timing loop times (inputs and outputs are bound before)."""

    call: Callable[[], object]
    outputs: tuple[TensorInfo, ...]  # as the first run produced them
    kernels: tuple[Kernel, ...]  # what the runtime really ran for the node
    keep: tuple[Any, ...] = ()  # what ``call`` relies on (sessions, buffers), alive as long as this is


@dataclass(frozen=True, slots=True)
class NodeGraph:
    """The graph a runtime executes for a model (its optimizations applied, its weights left where they
    are), and its nodes by the names the runtime's profiles give them."""

    model: onnx.ModelProto
    nodes: Mapping[str, onnx.NodeProto]


class SingleOp(Protocol):
    """One operator, or one node of a model, built and timed in isolation on a backend's runtime.

    ``options`` is an instance of the backend's ``options_type``. What the runtime refuses to build or
    run is an InputError (or a BackendError) in one line, as everywhere in layerperf.
    """

    def prepare(self, model: onnx.ModelProto, feed: Mapping[str, np.ndarray], *, threads: int,
                options: Any) -> PreparedOp:
        """Build ``model`` (one node; ``feed`` gives its graph inputs), bind its tensors, run it once.
        ``threads``: intra-op threads, 0 the runtime's default."""
        ...

    def node_graph(self, source: ModelSource, feed: Mapping[str, np.ndarray], options: Any) -> NodeGraph:
        """The graph the runtime executes for ``source`` under ``options``, for taking one node out of it
        (``feed``: the model's inputs, should naming its nodes take a run)."""
        ...

    def values(self, model: onnx.ModelProto, names: Sequence[str], feed: Mapping[str, np.ndarray], *,
               options: Any, data_dir: Path | None, what: str) -> dict[str, np.ndarray]:
        """The values tensors ``names`` of ``model`` take in one run on ``feed``, run as written (no
        optimization); ``data_dir`` holds its external data, ``what`` names it in an error."""
        ...
