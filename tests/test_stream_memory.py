"""Streaming keeps memory flat as the trace grows (fast; ``test_memory_bound.py`` is the slow RLIMIT test).

The reader's buffers are shrunk (segments, sorted runs, merge blocks, decoded blocks) so that a trace of
a few thousand events already spans many of each, and the memory Python and numpy allocate while a
trace is folded (``tracemalloc``: numpy reports its buffers there) is compared between a trace and one
four times its size. Reading whole grows with the file; streaming must not.
"""

from __future__ import annotations

import gc
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest

from layerperf.data import sketch
from layerperf.data.calls import Interner, TableBuilder
from layerperf.data.fold import Folded
from layerperf.readers import decode, detect, kineto_collect, kineto_links, ort, streaming
from layerperf.readers.dropped import Dropped
from stream_traces import kineto_launches, ort_loop, shrink, tef_nested

BLOCK_BYTES = 16 << 10


@pytest.fixture()
def small_buffers(monkeypatch: pytest.MonkeyPatch) -> None:
    shrink(monkeypatch, segment=512, run=4096, merge=4096, block=64)
    monkeypatch.setattr(streaming, "DRAIN_ROWS", 256)
    monkeypatch.setattr(kineto_links, "BLOCK", 256)
    monkeypatch.setattr(sketch, "EXACT_MAX", 64)  # a group's exact values are bounded too, at 4096 by default
    monkeypatch.setattr(sketch, "LOG_MIN", 256)  # and the values logged before those past it are bucketed


def _peak_bytes(read: Callable[[], Any]) -> tuple[int, Any]:
    """The most memory traced at once while ``read`` runs, and what it returned."""
    gc.collect()
    tracemalloc.start()
    try:
        result = read()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return peak, result


@pytest.mark.parametrize(("make", "small", "large"), [(ort_loop, {"runs": 100}, {"runs": 400}),
                                                       (tef_nested, {"n_top": 1200}, {"n_top": 4800}),
                                                       (kineto_launches, {"calls": 2000}, {"calls": 8000})],
                         ids=["ort", "tef", "kineto"])
def test_streamed_memory_flat_as_the_trace_grows(small_buffers: None, tmp_path: Path, make: Any,
                                                  small: dict[str, int], large: dict[str, int]) -> None:
    paths = [make(tmp_path / "small.json", **small), make(tmp_path / "large.json", **large)]
    streamed, whole = [], []
    for path in paths:
        peak, folded = _peak_bytes(lambda p=path: detect.read_folded(p, quantiles=True, block=BLOCK_BYTES))
        assert isinstance(folded, Folded) and folded.meta["streamed"]
        streamed.append(peak)
        whole.append(_peak_bytes(lambda p=path: detect.read_table(p, block=BLOCK_BYTES))[0])
    assert whole[1] > 2.5 * whole[0]  # the yardstick: reading whole grows with the file
    assert streamed[1] < 1.3 * streamed[0], (streamed, whole)
    assert streamed[1] < whole[1] / 2


def _every_view(path: Path) -> list[Any]:
    """Read a PyTorch trace with its device activities on disk and compute every GPU view and the
    per-kernel view from them; the activities' files removed after."""
    from layerperf.analysis import gpu_kernels
    from layerperf.analysis.gpu import annotations, idle, kernel_type, launch, memcpy, overlap, queue, temporal

    folded = detect.read_folded(path, activities=True, block=BLOCK_BYTES)
    source = folded.meta["activities"]
    try:
        return [temporal.temporal(source, folded.meta.get("run_windows_ns") or []), idle.idle(source),
                kernel_type.kernel_types(source), launch.launch(source), queue.queues(source), memcpy.memcpy(source),
                overlap.overlap(source), annotations.annotation_times(folded.meta["annotations"], source)
                if "annotations" in folded.meta else None, gpu_kernels.aggregate(source)]
    finally:
        source.close()


def test_gpu_views_memory_flat_as_the_trace_grows(small_buffers: None, tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """The GPU views and the per-kernel view of a trace four times larger hold no more: the activities
    stay on disk, served in blocks, and each view keeps per-group figures only."""
    from layerperf.readers import kineto_activities

    monkeypatch.setattr(kineto_activities, "BLOCK", 256)
    paths = [kineto_launches(tmp_path / "small.json", calls=2000), kineto_launches(tmp_path / "large.json", calls=8000)]
    streamed, whole = [], []
    for path in paths:
        peak, views = _peak_bytes(lambda p=path: _every_view(p))
        assert views[1] and views[3].launches > 0  # gaps and launches were found: the views saw the activities
        streamed.append(peak)
        whole.append(_peak_bytes(lambda p=path: detect.read_table(p, block=BLOCK_BYTES))[0])
    assert whole[1] > 2.5 * whole[0]
    assert streamed[1] < 1.3 * streamed[0], (streamed, whole)


def test_timeline_written_as_it_streams_memory_flat(small_buffers: None, tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """``analyze --timeline`` of a trace four times larger holds no more: calls are written a chunk at a time
    as the segments are folded (the unknown ids' calls wait on disk)."""
    from layerperf.renderers import timeline

    monkeypatch.setattr(timeline, "CHUNK_ROWS", 256)

    def written(path: Path) -> int:
        out = tmp_path / "timeline.json"
        with out.open("wb") as f:
            writer = timeline.Streamed(f, tmp_path)
            folded = detect.read_folded(path, sink=writer.add, block=BLOCK_BYTES)
            writer.finish(folded.meta)
        return writer.calls

    peaks = []
    for n_top in (600, 2400):
        path = tef_nested(tmp_path / f"t{n_top}.json", n_top=n_top)
        peak, calls = _peak_bytes(lambda p=path: written(p))
        assert calls == len(detect.read_table(path))
        peaks.append(peak)
    assert peaks[1] < 1.3 * peaks[0], peaks


def _block(n: int, kineto: bool) -> bytes:
    """A decoded block's worth of events, each with its own name and recorded shapes."""
    if kineto:
        events = [{"ph": "X", "cat": "cpu_op", "name": f"aten::op{k}", "pid": 1, "tid": 1, "ts": k, "dur": 1,
                   "args": {"Input Dims": [[1, k, 768]], "Input type": ["float"], "Concrete Inputs": [""]}}
                  for k in range(n)]
    else:
        events = [{"cat": "Node", "name": f"n{k}_kernel_time", "ph": "X", "pid": 1, "tid": 1, "ts": k, "dur": 1,
                   "args": {"op_name": "Relu", "provider": "CPUExecutionProvider",
                            "input_type_shape": [{"float": [1, k, 768]}], "output_type_shape": [{"float": [1, k]}]}}
                  for k in range(n)]
    return orjson.dumps(events)


@pytest.mark.parametrize("kineto", [False, True], ids=["ort", "kineto"])
def test_a_node_met_first_keeps_no_block_of_the_file(kineto: bool) -> None:
    """What a reader keeps of a node's first call (to compare its later calls with) holds bytes of its own:
    decoded raw shapes are views into the whole block they came from, so a trace naming a new node in every
    block would stay in memory whole (a profile of 8 MiB held 10.7 MiB at its peak, against 2.7 MiB now)."""
    gc.collect()
    tracemalloc.start()
    try:
        block = _block(3000, kineto)
        size = len(block)
        events = decode.decode_events(block)[:1]  # the first event alone is read; the block is dropped
        del block
        if kineto:
            kinds = kineto_collect.Kinds()
            cpu = kineto_collect.Cpu()
            kineto_collect.collect(events, kinds, Interner(), TableBuilder(), cpu, kineto_collect.Device(), [],
                                   Dropped(), [])
            kept: Any = kinds
        else:
            kept = ort.Reading()
            kept.idents.codes([ev.name for ev in events], [ev.args for ev in events])
        del events
        gc.collect()
        held, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert kept is not None and held < size / 4, (held, size)
