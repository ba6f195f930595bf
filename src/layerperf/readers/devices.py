"""The devices a trace names: PyTorch's Kineto traces carry ``deviceProperties`` (one object per GPU:
its name, memory, compute capability, SM count) beside their events. The report rates GPU work against
the named device's published peaks (:mod:`layerperf.calibration.device_peaks`), never this CPU's."""

from __future__ import annotations

from typing import Any

# the properties kept (what a person or the roofline reads); the rest of a device's object is left out
KEPT = ("id", "name", "totalGlobalMem", "computeMajor", "computeMinor", "numSms")


def from_skeleton(doc: Any) -> list[dict[str, Any]]:
    """The devices of a trace document without its events (``EventStream.skeleton``): one dict per
    ``deviceProperties`` entry that has a name, with the :data:`KEPT` keys it has; [] when none."""
    props = doc.get("deviceProperties") if isinstance(doc, dict) else None
    if not isinstance(props, list):
        return []
    out = []
    for entry in props:
        if isinstance(entry, dict) and isinstance(entry.get("name"), str) and entry["name"].strip():
            out.append({k: entry[k] for k in KEPT if isinstance(entry.get(k), str | int | float)
                        and not isinstance(entry.get(k), bool)})
    return out
