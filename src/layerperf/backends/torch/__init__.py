"""The PyTorch backend (``layerperf profile --backend torch``): every ``nn.Module``'s forward timed at its
boundaries, in situ.

The backend's own modules: :mod:`.driver` (one profile, start to end), :mod:`.options` (its flags, and
torch or the line saying how to install it), :mod:`.models` (a zoo name, a ``file.py:factory``, a
module object or an ONNX file -> a module and its inputs), :mod:`.from_onnx` (an ONNX graph as one
module per node), :mod:`.runner` (the model's calls: plain, recorded, hooked), :mod:`.level2` (level 2's
runs under torch.profiler).

The parts it shares with the in-code API (:mod:`layerperf.torch`, which imports them from here):
:mod:`.hooks` (the forward hooks that call a collector at each module's boundaries), :mod:`.record`
(one untimed pass: the modules in execution order, their shapes, FLOPs and bytes), :mod:`.ranges`
(profiler ranges at module boundaries), :mod:`.op_rows` (level 2: the aten ops and kernels inside
each module, from torch.profiler's events) with :mod:`.op_replay` (an op's recorded arguments, and its
work), :mod:`.cuda` (the device path: CUDA events at module boundaries, the allocator's counters,
kernels under modules), :mod:`.memory` (the allocator's events per module, from torch.profiler),
:mod:`.quiet_profiler` (torch.profiler sessions without kineto's chatter), and :mod:`.build` (the one
way a torch run's recording becomes a Profile). torch itself is imported only inside functions.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

from layerperf.backends.base import Availability, RunPlan
from layerperf.backends.torch.compiled import eager, hooks_warning_off
from layerperf.backends.torch.hooks import own_calls
from layerperf.backends.torch.options import INSTALL_HINT, TorchOptions, import_torch

if TYPE_CHECKING:
    from layerperf.collectors import Collectors
    from layerperf.data.profile import Profile


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
        # ``layerperf --help`` and ``layerperf backends`` import this class for its options; the driver pulls in
        # the cost model and numpy (importing it took 0.25 s more than this package alone, 0.03 s)
        from layerperf.backends.torch import driver  # lazy: the start-up of --help (above)

        # an in-code profile running meanwhile (layerperf.torch) records none of these calls; compiled code
        # runs eagerly, its original modules hooked (see compiled.py)
        with own_calls(), eager(), hooks_warning_off():
            return driver.profile(model, plan, options, collectors)

    def single_op(self) -> None:
        """None: one operator in isolation is not measured on PyTorch (yet); `layerperf bench` refuses it."""
        return None
