"""A drop-in ``InferenceSession`` for users of ONNX Runtime's per-layer perf fork, on stock ONNX Runtime.

The fork read a perf config named by a session config entry and wrote per-layer counters into the
profile JSON. With this module the same two lines work unchanged::

    sess_options.enable_profiling = True
    sess_options.add_session_config_entry("session.profiler.perf_config_file_name", "perf.json")
    sess = layerperf.onnxruntime.InferenceSession("model.onnx", sess_options)   # was onnxruntime.
    sess.run(None, feed)
    path = sess.end_profiling()   # node events now carry the counters in their args

Timings stay ONNX Runtime's own, in situ. Counters are taken at ``end_profiling()`` by layerperf's
stepwise executor over the last inputs the session ran (``passes`` passes; each node event gets
the median count per label), because stock ONNX Runtime has no hook at node boundaries.

A model with external data works as with ONNX Runtime: its data is looked for beside the model's
path, or for a model given as bytes in the folder that
``session.model_external_initializers_file_folder_path`` names (the working directory without it).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import numpy as np
import onnxruntime as ort

from layerperf.backends.ort.counting import count_layers
from layerperf.collectors.perf import CounterRequest
from layerperf.models import extdata
from layerperf.readers.ort import is_kernel_event, node_name, split_runs
from layerperf.util import atomic

PERF_CONFIG_KEY = "session.profiler.perf_config_file_name"
_LEVEL_NAMES = {
    ort.GraphOptimizationLevel.ORT_DISABLE_ALL: "disable", ort.GraphOptimizationLevel.ORT_ENABLE_BASIC: "basic",
    ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED: "extended", ort.GraphOptimizationLevel.ORT_ENABLE_ALL: "all",
}


class InferenceSession(ort.InferenceSession):
    """``onnxruntime.InferenceSession`` that honours the fork's perf config entry."""

    def __init__(self, path_or_bytes: str | bytes | os.PathLike[str], sess_options: ort.SessionOptions | None = None,
                 providers: list[Any] | None = None, *args: Any, passes: int = 5, **kwargs: Any) -> None:
        # absolute now: the counting worker runs later, perhaps after the caller changed directory
        self._lp_source = path_or_bytes if isinstance(path_or_bytes, bytes) else os.path.abspath(path_or_bytes)
        self._lp_data_dir = _data_dir(path_or_bytes, sess_options)
        self._lp_request: CounterRequest | None = None
        self._lp_feed: dict[str, np.ndarray] | None = None
        if sess_options is not None and sess_options.enable_profiling:
            config = _entry(sess_options, PERF_CONFIG_KEY)
            if config:
                self._lp_request = CounterRequest.build(None, config, passes)
                if self._lp_request:
                    self._lp_request.check()
        self._lp_opts = {
            "opt_level": _LEVEL_NAMES.get(sess_options.graph_optimization_level, "all") if sess_options else "all",
            "threads": sess_options.intra_op_num_threads if sess_options else 0,
            "provider": _first_provider(providers),
        }
        super().__init__(path_or_bytes, sess_options, providers, *args, **kwargs)

    def run(self, output_names: Any, input_feed: dict[str, Any], run_options: Any = None) -> Any:
        if self._lp_request is not None:
            self._lp_feed = {k: np.asarray(v) for k, v in input_feed.items()}
        return super().run(output_names, input_feed, run_options)

    def end_profiling(self) -> str:
        """End ONNX Runtime's profiling; with a perf config, add per-node counters to the file."""
        path = super().end_profiling()
        if self._lp_request is not None and self._lp_feed is not None and path:
            _add_counters(Path(path), self._lp_model_file(), self._lp_data_dir, self._lp_opts, self._lp_feed,
                          self._lp_request)
        return path

    def _lp_model_file(self) -> Path:
        if isinstance(self._lp_source, bytes):
            self._lp_source = str(atomic.process_temp(self._lp_source, "layerperf-session-", ".onnx"))
        return Path(os.fspath(self._lp_source))


def _entry(so: ort.SessionOptions, key: str) -> str:
    try:
        return str(so.get_session_config_entry(key))
    except Exception:  # ORT raises when the key was never set
        return ""


def _data_dir(path_or_bytes: str | bytes | os.PathLike[str], so: ort.SessionOptions | None) -> Path:
    """Where ONNX Runtime looks for this model's external data."""
    folder = _entry(so, extdata.FOLDER_KEY) if so is not None else ""
    if isinstance(path_or_bytes, bytes):
        return Path(os.path.abspath(folder or os.getcwd()))
    return Path(os.path.abspath(path_or_bytes)).parent


def _first_provider(providers: list[Any] | None) -> str:
    if not providers:
        return "CPUExecutionProvider"
    first = providers[0]
    return first[0] if isinstance(first, tuple) else str(first)


def _add_counters(path: Path, model: Path, data_dir: Path, opts: dict[str, Any], feed: dict[str, np.ndarray],
                  request: CounterRequest) -> None:
    events = json.loads(path.read_text())
    runs = split_runs(events)
    if not runs:
        return
    order = list(dict.fromkeys(n.name for n in runs[-1].nodes if n.parent is None))  # body nodes run in their parent
    result = count_layers(model, opts, feed, order, request, data_dir)
    medians = {name: {label: float(np.median(per_node[i])) for label, per_node in result["counts"].items()}
               for i, name in enumerate(order)}
    for ev in events:
        if is_kernel_event(ev) and node_name(ev["name"]) in medians:
            counts = medians[node_name(ev["name"])]
            # as the per-layer perf fork wrote them (label: count), and together for layerperf analyze
            ev.setdefault("args", {}).update({**counts, "layerperf_counters": counts})
    atomic.write_bytes(path, json.dumps(events).encode())
