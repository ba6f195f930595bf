"""TVM's own options (``--target``, ``--pipeline``, ``--tune``, ``--compare``, ``--level``...), checked
in one place. No TVM imported: the CLI builds its flags from these fields on every machine."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from layerperf.backends.base import option
from layerperf.errors import InputError

# what --pipeline takes (backends/tvm/pipeline.py builds them)
PIPELINES = ("default", "unfused", "legalize")
LEVELS = (1, 2)
STRATEGIES = ("evolutionary", "replay-trace")


@dataclass(frozen=True, slots=True)
class TvmOptions:
    """TVM's own options. ``tune`` is the MetaSchedule trials of the whole model, spread over its
    tasks (at least one each); ``compare`` profiles the untuned build too, and ``layerperf profile``
    prints the diff of the two."""

    target: str = field(default="llvm", metadata=option(
        "what TVM compiles for: a kind (llvm, cuda), the command-line form ('llvm -mcpu=znver4 -num-cores 4'), "
        "a JSON object or a tag; bare llvm is this machine's CPU (default llvm)"))
    pipeline: str = field(default="default", metadata=option(
        "TVM's Relax pipeline: default (fuses), unfused (one kernel per op), legalize (tvm.compile's own, no "
        "folding or fusion; default default)", choices=PIPELINES))
    tune: int = field(default=0, metadata=option(
        "tune the kernels with MetaSchedule before measuring: TRIALS in all, spread over the tasks (the "
        "database is kept per model and target: a rerun reuses it; 0: no tuning, default)", metavar="TRIALS"))
    compare: bool = field(default=False, metadata=option(
        "with --tune: also profile the untuned build, and print the diff of the two (per kernel and total)"))
    level: int = field(default=1, metadata=option(
        "1: kernels only; 2: kernels and the VM's own builtins (allocations, frees, shape checks; default 1)"))
    tune_strategy: str = field(default="evolutionary", metadata=option(
        "MetaSchedule's search: evolutionary (its cost model, default) or replay-trace (random samples: quick, "
        "for smoke runs)", choices=STRATEGIES))

    def validate(self) -> None:
        """InputError for a value no TVM build takes; the target is checked when it is made."""
        if self.pipeline not in PIPELINES:
            raise InputError(f"unknown TVM pipeline '{self.pipeline}'", hint="one of: " + ", ".join(PIPELINES))
        if self.level not in LEVELS:
            raise InputError(f"--level must be 1 (kernels) or 2 (kernels and the VM's builtins), got {self.level!r}")
        if self.tune < 0:
            raise InputError(f"--tune must be 0 (no tuning) or a number of trials, got {self.tune}")
        if self.compare and not self.tune:
            raise InputError("--compare compares the untuned build with the tuned one: give --tune TRIALS too")
        if self.tune_strategy not in STRATEGIES:
            raise InputError(f"unknown --tune-strategy '{self.tune_strategy}'", hint="one of: " + ", ".join(STRATEGIES))

    def untuned(self) -> TvmOptions:
        """The same build without tuning: what ``compare`` measures first."""
        return dataclasses.replace(self, tune=0, compare=False)
