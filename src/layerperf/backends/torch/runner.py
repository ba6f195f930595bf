"""The model the backend profiles, called: its calls in inference mode, the recorded pass, and hooked
passes with a collector at every module's boundaries."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from typing import TYPE_CHECKING, Any

from layerperf.backends.torch.hooks import module_hooks
from layerperf.backends.torch.models import TorchModel, forward_failed
from layerperf.backends.torch.record import Recorder, record

if TYPE_CHECKING:
    from layerperf.collectors import Collector


class Runner:
    """The model, its inputs, and the calls the profile makes of it (in inference mode)."""

    def __init__(self, model: TorchModel, *, synchronize: bool = False) -> None:
        self.model = model
        self.cpu_ns: list[int] = []
        self.synchronize = synchronize  # on a GPU: a call returns once the device has finished it

    def call(self) -> Any:
        import torch

        with torch.inference_mode():
            out = self.model.module(*self.model.args, **self.model.kwargs)
        if self.synchronize:
            torch.cuda.synchronize()
        return out

    def record(self) -> Recorder:
        try:
            return record(self.model, self.call)
        except Exception as exc:  # the model's own forward: torch's message, in one line
            raise forward_failed(exc, self.model) from None

    def index(self, rec: Recorder) -> dict[int, int]:
        return dict(rec.order)

    def targets(self, index: dict[int, int]) -> list[tuple[Any, int]]:
        """The profiled modules (``index``: module id -> layer) with their layers, the model's own included."""
        return [(m, index[id(m)]) for m in self.model.module.modules() if id(m) in index]

    def hooked_pass(self, index: dict[int, int], collector: Collector,
                    context: Callable[[], AbstractContextManager[Any]] = nullcontext) -> None:
        """One call with ``collector`` at every module's boundaries."""
        with module_hooks(index, collector.start, collector.stop), context():
            collector.begin_pass()
            self.call()
            collector.end_pass()
