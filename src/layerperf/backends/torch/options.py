"""What the PyTorch backend takes (:class:`TorchOptions`, the ``--level`` and ``--torch-device`` flags,
checked) and the torch it needs (:func:`import_torch`, one line saying how to install it).
:mod:`layerperf.torch` checks its own options against the same levels, devices and install line.

This module and the package's ``TorchBackend`` are what ``layerperf --help`` and ``layerperf backends``
import of the backend: nothing here pulls in more than the backend protocol.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from layerperf.backends.base import option
from layerperf.errors import InputError, MissingDependency

INSTALL_HINT = "pip install 'layerperf[torch]'"
LEVELS = (1, 2)
DEVICES = ("cpu", "cuda")


@dataclass(frozen=True, slots=True)
class TorchOptions:
    """PyTorch's own options."""

    level: int = field(default=1, metadata=option(
        "1: modules only (forward hooks, lowest cost); 2: modules and the aten ops inside each "
        "(torch.profiler; default 1)"))
    torch_device: str = field(default="cpu", metadata=option(
        "where the model runs: cpu, or cuda (device time per module from CUDA events, the caching "
        "allocator's figures per module, kernels under their modules at --level 2; default cpu)",
        choices=DEVICES))

    def validate(self) -> None:
        if self.level not in LEVELS:
            raise InputError(f"--level must be 1 (modules) or 2 (modules and aten ops), got {self.level!r}")
        check_device(self.torch_device)


def check_device(device: str) -> None:
    """``device`` is one this backend runs on here; cuda only where torch sees a GPU (one line if not)."""
    if device not in DEVICES:
        raise InputError(f"--torch-device must be cpu or cuda, got {device!r}")
    if device == "cuda":
        import torch

        if not torch.cuda.is_available():
            built = torch.version.cuda
            raise InputError(f"--torch-device cuda: torch.cuda.is_available() is False (torch {torch.__version__}, "
                             + (f"built for CUDA {built}: no usable GPU or driver)" if built else
                                "a build without CUDA)"),
                             hint="profile on the CPU (--torch-device cpu), or install a CUDA build of torch")


def import_torch() -> Any:
    """torch, or one line saying how to install it."""
    try:
        import torch
    except ImportError:
        raise MissingDependency("PyTorch (torch)", INSTALL_HINT) from None
    return torch
