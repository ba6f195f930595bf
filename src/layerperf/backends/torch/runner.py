"""The model the backend profiles, called: its calls in inference mode, the recorded pass, and hooked
passes with a collector at every module's boundaries. Every call is counted and named by what it is
for (``warm-up run 2``, ``profiled run 5``), so a forward that fails in any of them is one line naming
the model and the call (:func:`.models.forward_failed`)."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from typing import TYPE_CHECKING, Any

from layerperf.backends.torch.hooks import module_hooks
from layerperf.backends.torch.models import TorchModel, forward_failed
from layerperf.backends.torch.record import Recorder, record
from layerperf.errors import LayerperfError

if TYPE_CHECKING:
    from layerperf.collectors import Collector

RECORDED, WARMUP, PLAIN, PROFILED = "the recorded pass", "warm-up run", "plain run", "profiled run"


class Runner:
    """The model, its inputs, and the calls the profile makes of it (in inference mode). ``stage``: what
    the next plain :meth:`call` is for (the driver sets it: warm-up, then plain runs...)."""

    def __init__(self, model: TorchModel, *, synchronize: bool = False) -> None:
        self.model = model
        self.cpu_ns: list[int] = []
        self.synchronize = synchronize  # on a GPU: a call returns once the device has finished it
        self.stage = WARMUP
        self.calls = 0
        self._counts: dict[str, int] = {}

    def call(self, stage: str | None = None) -> Any:
        """One call of the model (``stage``: what for, default :attr:`stage`); a failure in it is a
        BackendError naming the model and the call, the model's exception its cause."""
        import torch

        stage = stage or self.stage
        self.calls += 1
        k = self._counts[stage] = self._counts.get(stage, 0) + 1  # no formatting here: plain runs are timed
        try:
            with torch.inference_mode():
                out = self.model.module(*self.model.args, **self.model.kwargs)
            if self.synchronize:
                torch.cuda.synchronize()
        except LayerperfError:
            raise  # layerperf's own, from a hook: already one line
        except Exception as exc:  # the model's own forward: torch's message, in one line
            which = stage if stage == RECORDED else f"{stage} {k}"
            raise forward_failed(exc, self.model, f"call {self.calls} of the model ({which})") from exc
        return out

    def record(self, *, root: bool = False) -> Recorder:
        return record(self.model, lambda: self.call(RECORDED), root=root)

    def index(self, rec: Recorder) -> dict[int, int]:
        return dict(rec.order)

    def targets(self, index: dict[int, int]) -> list[tuple[Any, int]]:
        """The profiled modules (``index``: module id -> layer) with their layers, the model's own included."""
        return [(m, index[id(m)]) for m in self.model.module.modules() if id(m) in index]

    def hooked_pass(self, index: dict[int, int], collector: Collector,
                    context: Callable[[], AbstractContextManager[Any]] = nullcontext, stage: str = PROFILED) -> None:
        """One call with ``collector`` at every module's boundaries."""
        with module_hooks(index, collector.start, collector.stop), context():
            collector.begin_pass()
            self.call(stage)
            collector.end_pass()
