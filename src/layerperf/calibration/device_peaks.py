"""Published peaks of GPUs, for rating the GPU work of a trace that names its device.

``layerperf calibrate`` measures this machine's CPU; a GPU trace (PyTorch's Kineto, with
``deviceProperties``) ran elsewhere, on a device this machine may not have. Its work is compared only
with that device's ceilings: the dense (no sparsity) figures of its vendor's datasheet, listed here
with the datasheet named. A device not listed has no ceilings and no "% of peak" — never this CPU's.

Tensor-core figures are the datasheets' "with sparsity" figures halved (the datasheets mark them so);
float32 is the CUDA cores' rate. PyTorch runs cuDNN convolutions on TF32 tensor cores by default
(``torch.backends.cudnn.allow_tf32``), so a float32 convolution may pass the float32 peak, never the
TF32 one.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

TERA = 1e12
H100_SHEET = "NVIDIA H100 Tensor Core GPU datasheet (nvidia.com/h100)"
A100_SHEET = "NVIDIA A100 Tensor Core GPU datasheet (nvidia.com/a100)"
V100_SHEET = "NVIDIA V100 Tensor Core GPU datasheet (nvidia.com/v100)"
A10_SHEET = "NVIDIA A10 Tensor Core GPU datasheet (nvidia.com/a10)"
L4_SHEET = "NVIDIA L4 Tensor Core GPU datasheet (nvidia.com/l4)"


@dataclass(frozen=True, slots=True)
class DevicePeaks:
    """One GPU model's published dense peaks (per second) and where they are published; None: the
    datasheet gives none."""

    model: str
    fp32_flops_per_s: float
    tf32_flops_per_s: float | None  # tensor cores, dense
    fp16_flops_per_s: float | None  # tensor cores, dense (bf16 the same where the datasheet says so)
    int8_ops_per_s: float | None  # tensor cores, dense
    bytes_per_s: float  # memory bandwidth
    source: str


def _peaks(model: str, fp32: float, tf32: float | None, fp16: float | None, int8: float | None,
           bandwidth_gb_s: float, source: str) -> DevicePeaks:
    return DevicePeaks(model, fp32 * TERA, None if tf32 is None else tf32 * TERA, None if fp16 is None else fp16 * TERA,
                       None if int8 is None else int8 * TERA, bandwidth_gb_s * 1e9, source)


# (pattern on the name CUDA reports, its peaks); the first match wins, so variants come before the rest
TABLE: tuple[tuple[re.Pattern[str], DevicePeaks], ...] = (
    (re.compile(r"H100.*(PCIe)", re.I), _peaks("H100 PCIe", 51, 378, 756, 1513, 2000, H100_SHEET)),
    (re.compile(r"H100.*NVL", re.I), _peaks("H100 NVL", 60, 417.5, 835.5, 1670.5, 3900, H100_SHEET)),
    (re.compile(r"H100.*(SXM|HBM3)", re.I), _peaks("H100 SXM", 67, 494.5, 989.5, 1979, 3350, H100_SHEET)),
    (re.compile(r"A100.*80GB.*PCIe|A100.*PCIE.*80GB", re.I), _peaks("A100 80GB PCIe", 19.5, 156, 312, 624, 1935,
                                                                        A100_SHEET)),
    (re.compile(r"A100.*SXM.*80GB|A100.*80GB.*SXM", re.I), _peaks("A100 80GB SXM", 19.5, 156, 312, 624, 2039,
                                                                      A100_SHEET)),
    (re.compile(r"A100.*(40GB|PCIE)", re.I), _peaks("A100 40GB", 19.5, 156, 312, 624, 1555, A100_SHEET)),
    (re.compile(r"V100S", re.I), _peaks("V100S PCIe", 16.4, None, 130, None, 1134, V100_SHEET)),
    (re.compile(r"V100.*SXM2", re.I), _peaks("V100 SXM2", 15.7, None, 125, None, 900, V100_SHEET)),
    (re.compile(r"V100.*PCIE", re.I), _peaks("V100 PCIe", 14, None, 112, None, 900, V100_SHEET)),
    (re.compile(r"\bA10\b", re.I), _peaks("A10", 31.2, 62.5, 125, 250, 600, A10_SHEET)),
    (re.compile(r"\bL4\b", re.I), _peaks("L4", 30.3, 60, 121, 242.5, 300, L4_SHEET)),
)


def for_name(name: str) -> DevicePeaks | None:
    """The published peaks of the GPU CUDA names ``name`` (``NVIDIA H100 80GB HBM3``), None when not listed."""
    return next((peaks for pattern, peaks in TABLE if pattern.search(name)), None)


@dataclass(frozen=True, slots=True)
class TraceDevice:
    """The accelerator a trace's device activity ran on: its name when the trace says it (None: a GPU the
    trace does not name), how many the trace lists, and its published peaks where known."""

    name: str | None
    count: int
    peaks: DevicePeaks | None

    def label(self) -> str:
        named = self.name or "a CUDA GPU the trace does not name"
        return named + (f" (and {self.count - 1} more)" if self.count > 1 else "")


def trace_device(meta: Mapping[str, Any]) -> TraceDevice | None:
    """The device of a trace that holds device activity (kernels): the first of its ``devices``
    (``deviceProperties``), else an unnamed GPU. None for a CPU trace, even one recorded on a machine
    with a GPU (its ``deviceProperties`` name a device nothing ran on)."""
    if not _active(meta):
        return None
    named = _named(meta)
    return TraceDevice(named[0], len(named), for_name(named[0])) if named else TraceDevice(None, 1, None)


def unrated(meta: Mapping[str, Any]) -> str | None:
    """Why a trace's work is rated against no peak, or None when it may be. A trace whose
    ``deviceProperties`` name a GPU it recorded no activity on is a CPU run on a machine with that GPU, or
    a GPU run profiled with CPU activity only: it cannot tell which, so neither that GPU's peaks nor a
    CPU's apply."""
    named = _named(meta)
    if not named or _active(meta):
        return None
    return (f"% of peak not given: the trace names the GPU {named[0]} but records no activity on it (a CPU run "
            "on a machine with that GPU, or a GPU run profiled on the CPU only)")


def _active(meta: Mapping[str, Any]) -> bool:
    """Whether the trace recorded activity on a device (kernels, copies, sets)."""
    return meta.get("kernels") is not None or bool(meta.get("device_events"))


def _named(meta: Mapping[str, Any]) -> list[str]:
    """The names of the devices the trace's ``deviceProperties`` list."""
    devices: Sequence[Any] = meta.get("devices") or ()
    return [str(d["name"]) for d in devices if isinstance(d, Mapping) and d.get("name")]
