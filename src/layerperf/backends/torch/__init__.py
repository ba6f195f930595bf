"""The PyTorch backend: every ``nn.Module``'s forward timed at its boundaries, in situ.

Its modules: :mod:`.driver` (one profile, start to end), :mod:`.models` (a zoo name, a
``file.py:factory``, a module object or an ONNX file -> a module and its inputs), :mod:`.hooks` (the
forward hooks that call a collector at each module's boundaries), :mod:`.record` (one untimed pass:
the modules in execution order, their shapes, FLOPs and bytes), :mod:`.from_onnx` (an ONNX graph as
one module per node), :mod:`.ops` (level 2: the aten ops inside each module, from torch.profiler),
:mod:`.memory` (the allocator's events per module, from torch.profiler), :mod:`.cuda` (the device path:
CUDA events at module boundaries, the allocator's counters, kernels under modules). In code
(:mod:`layerperf.torch`): :mod:`.incode` (one in-code profile, its collectors, its Profile),
:mod:`.insitu` (its rows and runs as the user's code runs), :mod:`.backward` (a row per module call's
backward, from autograd node hooks), :mod:`.gradcost` (the work of a training run's rows).
torch itself is imported only inside functions.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from layerperf.backends.base import Availability, RunPlan, option

if TYPE_CHECKING:
    from layerperf.collectors import Collectors
    from layerperf.data.profile import Profile

INSTALL_HINT = "pip install 'layerperf[torch]'"
LEVELS = (1, 2)


@dataclass(frozen=True, slots=True)
class TorchOptions:
    """PyTorch's own options."""

    level: int = field(default=1, metadata=option(
        "1: modules only (forward hooks, lowest cost); 2: modules and the aten ops inside each "
        "(torch.profiler; default 1)"))
    torch_device: str = field(default="cpu", metadata=option(
        "where the model runs: cpu, or cuda (device time per module from CUDA events, the caching "
        "allocator's figures per module, kernels under their modules at --level 2; default cpu)",
        choices=("cpu", "cuda")))

    def validate(self) -> None:
        from layerperf.errors import InputError

        if self.level not in LEVELS:
            raise InputError(f"--level must be 1 (modules) or 2 (modules and aten ops), got {self.level!r}")
        from layerperf.backends.torch.cuda import check_device

        check_device(self.torch_device)


def import_torch() -> Any:
    """torch, or one line saying how to install it."""
    from layerperf.errors import MissingDependency

    try:
        import torch
    except ImportError:
        raise MissingDependency("PyTorch (torch)", INSTALL_HINT) from None
    return torch


class TorchBackend:
    name: ClassVar[str] = "torch"
    summary: ClassVar[str] = ("PyTorch: each nn.Module's forward timed at its boundaries by hooks, in situ "
                              "(level 2 adds the aten ops inside each); FLOPs from torch.utils.flop_counter")
    model_suffixes: ClassVar[tuple[str, ...]] = (".py",)  # FILE.py:FACTORY
    options_type: ClassVar[type] = TorchOptions

    def availability(self) -> Availability:
        try:
            import torch
        except ImportError as exc:
            return Availability(False, None, f"torch does not import ({exc}): {INSTALL_HINT}")
        return Availability(True, torch.__version__)

    def profile(self, model: Any, plan: RunPlan, options: Any, collectors: Collectors) -> Profile:
        import_torch()
        from layerperf.backends.torch.driver import profile

        return profile(model, plan, options, collectors)

    def single_op(self) -> None:
        """None: one operator in isolation is not measured on PyTorch (yet); `layerperf bench` refuses it."""
        return None
