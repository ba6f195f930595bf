"""Streaming analysis (readers/streaming.py, data/fold.py, data/sketch.py) gives the whole-file figures.

Every grouping and aggregate of ``read_folded`` is compared with ``aggregate`` over ``read_table`` on
traces whose nesting, B/E pairs and control-flow bodies straddle chunk, run and segment boundaries
(the sizes made tiny here), read in one process and in two, plain and gzipped.
"""

from __future__ import annotations

import gzip
import json
import os
import random
import zlib
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from layerperf.analysis import aggregate as analysis
from layerperf.analysis import gpu_kernels as kernels
from layerperf.data.fold import Folded
from layerperf.data.sketch import ALPHA, EXACT_MAX, Sketch
from layerperf.errors import InputError
from layerperf.readers import detect, gunzip, gzsplit, kineto_links, parallel
from stream_traces import check_folded as _check
from stream_traces import kineto_launches, ort_loop, shrink, tef_nested


@pytest.fixture(params=["default", "zlib"])
def inflate(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Each gzipped reading with the engine installs pick (ISA-L, with the fast extra) and with zlib."""
    if request.param == "zlib":
        monkeypatch.setenv("LAYERPERF_INFLATE", "zlib")
    else:
        monkeypatch.delenv("LAYERPERF_INFLATE", raising=False)
    return str(request.param)


def test_inflate_engine_is_isal_when_installed_and_zlib_when_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("LAYERPERF_INFLATE", raising=False)
    try:
        from isal import isal_zlib  # the fast extra, in the lock: make setup installs it
    except ImportError:
        if os.environ.get("CI"):
            raise  # CI installs from the lock: ISA-L missing there is a broken install
        isal_zlib = None
    assert gunzip.engine() is (isal_zlib or zlib)
    monkeypatch.setenv("LAYERPERF_INFLATE", "zlib")
    assert gunzip.engine() is zlib


@pytest.fixture()
def tiny(monkeypatch: pytest.MonkeyPatch) -> None:
    """Segments, runs and merge blocks of a few records: every boundary falls inside nesting."""
    shrink(monkeypatch, segment=40, run=97, merge=50, block=13)


def test_gunzip_reads_and_skips_across_pieces(inflate: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Reads and skips of any size, across the inflated pieces (of 1,000 bytes here), give the bytes in order;
    at the end a read gives what is left, then nothing."""
    data = bytes(range(256)) * 40 + os.urandom(5000)  # 15,240 bytes, the end not compressible
    path = tmp_path / "d.gz"
    path.write_bytes(gzip.compress(data))
    monkeypatch.setattr(gunzip, "PIECE", 1000)
    f = gunzip.GunzipAhead(path)
    at = 0
    try:
        for op, n in [("read", 10), ("skip", 2500), ("read", 3000), ("read", 1), ("skip", 0), ("read", 990),
                      ("skip", 1), ("read", 0), ("read", 4000), ("skip", 999)]:
            if op == "read":
                assert f.read(n) == data[at:at + n], (op, n, at)
            else:
                assert f.skip(n) == n
            at += n
        assert f.read(100_000) == data[at:]
        assert f.read(10) == b"" and f.skip(10) == 0
    finally:
        f.close()


@pytest.mark.parametrize("make", [tef_nested, ort_loop], ids=["tef", "ort"])
def test_streaming_equals_whole_file(tiny: None, inflate: str, tmp_path: Path, make: object) -> None:
    path = make(tmp_path / "t.json")  # type: ignore[operator]
    _check(path)
    zipped = tmp_path / "t.json.gz"
    zipped.write_bytes(gzip.compress(path.read_bytes()))
    _check(zipped)


DATA = Path(__file__).parent / "data"


@pytest.mark.parametrize("path", [DATA / "torch_cuda" / "trace.json.gz", DATA / "torch_cpu" / "trace.json.gz",
                                  DATA / "torch_resnet18_cuda" / "trace.json.gz"], ids=["v100", "cpu", "h100"])
def test_kineto_streaming_equals_whole_file(tiny: None, path: Path) -> None:
    """PyTorch traces: operators first, runtime calls and kernels after; device time linked across segments."""
    folded = _check(path)
    assert folded.meta["device_unlinked"] == detect.read_table(path).meta["device_unlinked"]


def _same_kernels(path: Path) -> None:
    """The device activities folded with the ops: every column ``--aggregate-by kernel`` reads, and its
    rows, as the whole-file reading gives them."""
    whole = kernels.of(detect.read_table(path))
    streamed = detect.read_folded(path, activities=True).meta["activities"]
    try:
        assert whole is not None and len(streamed) == len(whole)
        folded = next(streamed.blocks())  # one block: the trace's few activities, in its order
        for column in ("name", "kind", "device", "launcher"):
            assert getattr(whole, column).tolist() == getattr(folded, column).tolist(), column
        for column in ("dur_ns", "ts_ns", "stream", "correlation"):
            assert np.array_equal(getattr(whole, column), getattr(folded, column)), column
        for how in kernels.BY_AGGREGATE:
            assert kernels.order(kernels.aggregate(whole), None, how) == \
                kernels.order(kernels.aggregate(streamed), None, how)
    finally:
        streamed.close()


@pytest.mark.parametrize("path", [DATA / "torch_cuda" / "trace.json.gz",
                                  DATA / "torch_resnet18_cuda" / "trace.json.gz"],
                         ids=["v100", "h100"])
def test_kineto_kernels_streamed(tiny: None, path: Path) -> None:
    _same_kernels(path)
    assert "activities" not in detect.read_folded(path).meta  # kept only when asked for


def test_kineto_unlinked_activity(tiny: None, tmp_path: Path) -> None:
    """A kernel with no launching call, and one whose call lies in no op: rows of their own, as read whole;
    two kernels of a call with no External id inside an op: that op's device time (and their launcher)."""
    doc = json.loads(gzip.decompress((DATA / "torch_cuda" / "trace.json.gz").read_bytes()))
    doc["traceEvents"] += [
        {"ph": "X", "cat": "Kernel", "name": "orphan", "pid": 0, "tid": "stream 7", "ts": 1621401187225275,
         "dur": 3, "args": {"correlation": 999999}},
        {"ph": "X", "cat": "Runtime", "name": "cudaLaunchKernel", "pid": 24572, "tid": "24572",
         "ts": 1621401100000000, "dur": 5, "args": {"correlation": 888888}},
        {"ph": "X", "cat": "Kernel", "name": "outside", "pid": 0, "tid": "stream 7", "ts": 1621401100000010,
         "dur": 4, "args": {"correlation": 888888}},
        {"ph": "X", "cat": "Runtime", "name": "cudaLaunchKernel", "pid": 24572, "tid": "24572",
         "ts": 1621401187223272, "dur": 3, "args": {"correlation": 777777}},
        *({"ph": "X", "cat": "Kernel", "name": f"inside{k}", "pid": 0, "tid": "stream 7",
           "ts": 1621401187225300 + 10 * k, "dur": 2, "args": {"correlation": 777777}} for k in range(2))]
    path = tmp_path / "t.json"
    path.write_text(json.dumps(doc))
    assert _check(path).meta["device_unlinked"] == 2
    _same_kernels(path)
    table = kernels.of(detect.read_table(path))
    assert table is not None
    assert {table.launcher[k] for k in range(len(table)) if table.name[k].startswith("inside")} == {"aten::zeros"}


@pytest.mark.parametrize("many", [False, True], ids=["two-stretches", "many-stretches"])
@pytest.mark.parametrize("make", [tef_nested, ort_loop], ids=["tef", "ort"])
def test_two_processes(tiny: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, many: bool, make: object) -> None:
    """A file split between two processes (its B/E pairs open across stretches) folds to the same figures."""
    options = {"n_top": 400, "shuffle": False} if make is tef_nested else {"runs": 200}
    path = make(tmp_path / "t.json", **options)  # type: ignore[operator]
    monkeypatch.setattr(parallel, "MIN_BYTES", 0)
    if many:
        _split_small(monkeypatch)
    folded = _check(path)
    assert folded.meta.get("processes") == 2
    assert (folded.meta["stretches"] > 2) == many


def _split_small(monkeypatch: pytest.MonkeyPatch) -> None:
    """Small files (plain or gzipped) read by two processes in stretches of 16 KiB, the gzipped cuts looked for
    in small windows."""
    monkeypatch.setattr(parallel, "MIN_BYTES", 0)
    monkeypatch.setattr(gzsplit, "MIN_DECOMPRESSED", 0)
    monkeypatch.setattr(gzsplit, "STRETCH_BYTES", 16 << 10)
    monkeypatch.setattr(gzsplit, "WINDOW", 4096)
    monkeypatch.setattr(gzsplit, "_SKIP", 1000)


@pytest.mark.parametrize("make", [tef_nested, ort_loop], ids=["tef", "ort"])
def test_two_processes_gzipped(tiny: None, inflate: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                               make: object) -> None:
    """A gzipped file, both processes inflating it and each parsing its stretch, folds to the same figures;
    a damaged one is read again in one process, which reports the damage."""
    options = {"n_top": 400, "shuffle": False} if make is tef_nested else {"runs": 200}
    path = make(tmp_path / "t.json", **options)  # type: ignore[operator]
    zipped = tmp_path / "t.json.gz"
    zipped.write_bytes(gzip.compress(path.read_bytes()))
    _split_small(monkeypatch)
    folded = _check(zipped)
    assert folded.meta.get("processes") == 2 and folded.meta["stretches"] == 2  # cut in two (their events cost alike)
    cut = tmp_path / "cut.json.gz"
    cut.write_bytes(zipped.read_bytes()[: zipped.stat().st_size * 3 // 4])
    with pytest.raises(InputError, match="gzip"):
        detect.read_folded(cut, quantiles=True)


@pytest.mark.parametrize("zipped", [False, True], ids=["plain", "gzip"])
def test_kineto_two_processes(tiny: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, zipped: bool) -> None:
    """A PyTorch trace read by two processes (ops in the first stretch, their kernels in the second, each
    numbering identities and threads on its own) folds to the whole-file figures."""
    path = kineto_launches(tmp_path / "k.json", calls=3000)
    if zipped:
        path = tmp_path / "k.json.gz"
        path.write_bytes(gzip.compress((tmp_path / "k.json").read_bytes()))
    _split_small(monkeypatch)
    monkeypatch.setattr(kineto_links, "BLOCK", 100)
    folded = _check(path)
    assert folded.meta.get("processes") == 2 and folded.meta["stretches"] > 2
    assert folded.meta["device_events"] == 3000


def test_stretches_carry_each_identity_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A process carries its identities from stretch to stretch and each part holds only those new to the
    process: over a process's parts, each identity once (all so far in each part grew as stretches times
    identities)."""
    from layerperf.readers import streaming, tef

    events = [{"ph": "X", "name": f"op{k}", "pid": 1, "tid": 1, "ts": 10 * k, "dur": 5, "args": {}}
              for k in range(6000)]
    events += [{"ph": "X", "name": f"op{k}", "pid": 1, "tid": 1, "ts": 60000 + 10 * k, "dur": 5, "args": {}}
               for k in range(0, 6000, 7)]  # met again, later
    path = tmp_path / "t.json"
    path.write_text(json.dumps(events))
    _split_small(monkeypatch)
    spilled = streaming._two_processes(path, tef, tmp_path, False)
    assert spilled is not None and len(spilled) > 10
    per_process: dict[int, list[object]] = {}
    for s in spilled:
        per_process.setdefault(s.part.reading, []).extend(s.part.idents)
    assert len(per_process) == 2
    assert all(len(ids) == len(set(ids)) for ids in per_process.values())
    assert len(set().union(*per_process.values())) == 6000


def test_ort_counters_and_int_ops_over_many_stretches(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An ONNX Runtime profile whose runs meet new nodes as they go, with integer operations and per-node
    counters, read in dozens of stretches: names in the whole-file order, and every figure, counters and
    integer operations included, as read whole (each part carries only what its stretch worked out)."""
    rng, events, ts = random.Random(3), [], 0
    for r in range(6):
        start, names = ts, list(range((r + 1) * 250))
        rng.shuffle(names)
        for k in names:
            d, width = rng.randint(1, 9), 8 + k % 50
            integer = k % 3 == 0
            args: dict[str, object] = {
                "op_name": "MatMulInteger" if integer else "Relu", "provider": "CPUExecutionProvider",
                "input_type_shape": [{"int8": [1, width]}, {"int8": [width, 4]}] if integer else
                [{"float": [1, width]}],
                "output_type_shape": [{"int32": [1, 4]}] if integer else [{"float": [1, width]}]}
            if k % 2 == 0:
                args["layerperf_counters"] = {"cycles": float(1000 + k), "instr": float(7 * k)}
            events.append({"cat": "Node", "name": f"n{k}_kernel_time", "ph": "X", "pid": 1, "tid": 7, "ts": ts,
                           "dur": d, "args": args})
            ts += d
        events.append({"cat": "Session", "name": "model_run", "ph": "X", "pid": 1, "tid": 7, "ts": start,
                       "dur": ts - start})
        ts += 5
    path = tmp_path / "t.json"
    path.write_text(json.dumps(events))
    _split_small(monkeypatch)
    table = detect.read_table(path)
    folded = _check(path)
    assert folded.meta["stretches"] > 10
    ref, got = analysis.aggregate(table, "name", "sum"), folded.table("name", "sum")
    assert sorted(ref.counters) == sorted(got.counters) == ["cycles", "instr"]
    for c in ref.counters:
        assert np.allclose(ref.counters[c], got.counters[c], equal_nan=True), c
    assert np.isfinite(got.int_ops).sum() > 100 and np.isfinite(got.counters["cycles"]).sum() > 100
    from layerperf.readers import ort, streaming

    carried: dict[tuple[int, str], list[int]] = {}  # per process: the identities its parts carry figures of
    for s in streaming._two_processes(path, ort, tmp_path, True) or []:
        carried.setdefault((s.part.reading, "counters"), []).extend(s.part.ident_counters)
        carried.setdefault((s.part.reading, "int_ops"), []).extend(s.part.ident_int_ops)
    assert len(carried) == 4 and all(len(k) == len(set(k)) for k in carried.values())  # once, not all so far a part


def test_a_pair_open_across_the_cut(tiny: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A B/E pair open from the first stretch to the last (once a ValueError: the pairs joined across parts
    were a part more than the parts' identity maps)."""
    events = [{"ph": "B", "name": "outer", "pid": 1, "tid": 1, "ts": 0}]
    events += [{"ph": "X", "name": f"op{k % 3}", "pid": 1, "tid": 1, "ts": 1 + 10 * k, "dur": 5, "args": {}}
               for k in range(5000)]
    events += [{"ph": "E", "name": "outer", "pid": 1, "tid": 1, "ts": 60000}]
    path = tmp_path / "t.json"
    path.write_text(json.dumps(events))
    monkeypatch.setattr(parallel, "MIN_BYTES", 0)
    folded = _check(path)
    assert folded.meta["processes"] == 2 and folded.calls == 5001
    rows = folded.table("name", "sum")
    outer = list(rows.name).index("outer")
    assert rows.incl_ns[outer] == 60000e3 and rows.total_ns[outer] == (60000 - 5000 * 5) * 1e3  # itself: 35 ms


@pytest.mark.parametrize("zipped", [False, True], ids=["plain", "gzip"])
def test_stretches_taken_in_any_share_read_every_event_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                            zipped: bool) -> None:
    """However the two processes share the stretches out (here one takes every third, skipping the rest, and
    another the others), the stretches hold every event once, in file order, and every one but the last
    ends where the next begins."""
    path = kineto_launches(tmp_path / "k.json", calls=3000)
    events = json.loads(path.read_text())["traceEvents"]
    if zipped:
        path = tmp_path / "k.json.gz"
        path.write_bytes(gzip.compress((tmp_path / "k.json").read_bytes()))
    _split_small(monkeypatch)
    mine, theirs = gzsplit.stretches(path), gzsplit.stretches(path)  # each as a process of its own reads them
    assert mine is not None and theirs is not None
    n = len(mine[0])
    assert n == gzsplit.MAX_STRETCHES or n > 10
    got: dict[int, list[str]] = {}
    for opens, ks in ((mine[0], range(0, n, 3)), (theirs[0], [k for k in range(n) if k % 3])):
        for k in ks:
            got[k] = [f"{e.name}@{e.ts}" for chunk in opens[k]().chunks() for e in chunk]
    for _, done in (mine, theirs):
        done()
    assert all(got[k] for k in range(n))
    assert [e for k in range(n) for e in got[k]] == [f"{e['name']}@{e['ts']}" for e in events]


def test_analyze_cli_streams_the_same_rows(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from layerperf.cli import main

    cases = [(ort_loop(tmp_path / "t.json"), ["--aggregate", how]) for how in ("sum", "median")]
    cases += [(DATA / "torch_cuda" / "trace.json.gz", ["--aggregate-by", "kernel", "--aggregate", how])
              for how in ("sum", "median", "max")]
    for path, args in cases:
        assert main(["analyze", str(path), "--format", "csv", *args]) == 0
        streamed = capsys.readouterr().out
        assert main(["analyze", str(path), "--format", "csv", *args, "--timeline",
                     str(tmp_path / "tl.json")]) == 0  # a timeline needs every call: read whole
        assert capsys.readouterr().out == streamed


def test_sketch_exact_when_small_and_within_alpha_when_large() -> None:
    rng = np.random.default_rng(0)
    for n in (1, 2, 7, EXACT_MAX):
        v = rng.lognormal(3, 2, n)
        s = Sketch()
        s.add(v)
        assert s.is_exact and s.median() == np.median(v) and s.quantile(90) == np.percentile(v, 90)
    v = rng.lognormal(3, 2, 50_000)
    whole, parts = Sketch(), Sketch()
    whole.add(v)
    for chunk in np.array_split(v, 13):  # merged in pieces: the same buckets
        piece = Sketch()
        piece.add(chunk)
        parts.merge(piece)
    assert not whole.is_exact
    for q in (50, 90):
        assert whole.quantile(q) == parts.quantile(q)
        assert abs(whole.quantile(q) / np.percentile(v, q) - 1) <= ALPHA


def test_sketch_nan_and_zero() -> None:
    s = Sketch()
    s.add(np.zeros(EXACT_MAX + 5))
    assert s.median() == 0.0
    s.add(np.array([np.nan]))
    assert np.isnan(s.median())  # unknown stays unknown


def test_a_call_open_across_the_trace_is_joined_few_times(tiny: None, tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """One call spanning every other: no cut until the end, and the records held are joined (and searched for a
    cut) each time they double, not once per merge block (which made the join quadratic)."""
    from layerperf.readers import streaming

    events = [{"ph": "X", "name": "outer", "pid": 1, "tid": 1, "ts": 0.0, "dur": 1e6, "args": {}}]
    events += [{"ph": "X", "name": f"op{k % 5}", "pid": 1, "tid": 1, "ts": 10.0 + 100 * k, "dur": 50.0, "args": {}}
               for k in range(3000)]
    path = tmp_path / "t.json"
    path.write_text(json.dumps(events[::-1]))
    tries = []
    cuts = streaming._cuts
    monkeypatch.setattr(streaming, "_cuts", lambda cols, origin: tries.append(cols[0].size) or cuts(cols, origin))
    _check(path)
    assert 3 <= len(tries) <= 12, tries  # 3001 records, segments of 40 asked for, blocks of ~50: log2, not 60


@pytest.mark.parametrize("inflate", ["isal", "zlib"])
def test_zero_padding_after_gzip_is_read_past_and_junk_after_it_named_where_it_is(
        inflate: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # gzip(1) and Python's gzip read past zeros after a member (tape padding), however many reads they span
    if inflate == "zlib":
        monkeypatch.setenv("LAYERPERF_INFLATE", "zlib")
    monkeypatch.setattr(gunzip, "COMPRESSED_BLOCK", 1000)
    events = [{"ph": "X", "name": f"n{i % 5}", "pid": 1, "tid": 1, "ts": 10.0 * i, "dur": 4.0} for i in range(300)]
    text = json.dumps(events).encode()
    member = gzip.compress(text, mtime=0)
    padded = tmp_path / "padded.json.gz"  # the text in two members, 5,000 zeros between them, 3 after
    half = len(text) // 2
    padded.write_bytes(gzip.compress(text[:half], mtime=0) + b"\0" * 5000 + gzip.compress(text[half:], mtime=0)
                       + b"\0" * 3)
    assert len(detect.read_table(padded)) == 300
    junk = tmp_path / "junk.json.gz"
    junk.write_bytes(member + b"\0" * 2500 + b"garbage")
    with pytest.raises(InputError, match=rf"7 bytes after the gzip data, at byte {len(member) + 2500}, are not gzip"):
        detect.read_table(junk)


def test_segments_are_cut_at_their_size_when_blocks_fill_it_exactly(monkeypatch: pytest.MonkeyPatch) -> None:
    # merge blocks that add up to the segment size exactly left no record past it, so no cut: the next try
    # waited for twice as many records, and every segment after held two (10M events: +80 MB)
    from layerperf.readers import kineto_stream, spill, streaming

    monkeypatch.setattr(streaming, "SEGMENT_RECORDS", 256)

    class Blocks:  # what a merge of time-ordered runs gives: blocks of 64 records
        def sorted_blocks(self) -> Any:
            for k in range(40):
                rec = spill.records(64)
                rec["ts_us"] = 10.0 * (k * 64 + np.arange(64))
                rec["neg_dur"] = -5.0
                rec["seq"] = k * 64 + np.arange(64)
                yield rec

    held: list[int] = []
    real = streaming.cuts

    def counted(key: np.ndarray, start: np.ndarray, end: np.ndarray) -> list[int]:
        held.append(int(key.size))
        return real(key, start, end)

    monkeypatch.setattr(streaming, "cuts", counted)
    segments = list(kineto_stream._segments(Blocks(), 0.0, None))  # type: ignore[arg-type]
    assert sum(s.size for s in segments) == 40 * 64
    assert held and max(held) <= 256 + 64, held


@pytest.mark.parametrize("where", ["missing", "a-file"])
def test_a_temporary_folder_that_is_none_is_one_line(where: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    from layerperf.cli import main

    trace = kineto_launches(tmp_path / "k.json", calls=20)
    target = tmp_path / where
    if where == "a-file":
        target.write_text("not a folder")
    monkeypatch.setenv("LAYERPERF_TMPDIR", str(target))
    assert main(["analyze", str(trace)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"layerperf: error: LAYERPERF_TMPDIR={target} is not a folder this process can write in (set it "
                   "to one, or unset it for the system's temporary folder)"]


def _kineto_ops(n: int, odd: dict[int, dict[str, Any]]) -> dict[str, Any]:
    """A Kineto trace of ``n`` operators one after the other, event ``i`` updated with ``odd[i]``."""
    events = [{"ph": "X", "cat": "cpu_op", "name": f"aten::op{i % 5}", "pid": 1, "tid": 1, "ts": 10.0 * i, "dur": 5.0,
               "args": {"External id": i + 1, "Input Dims": [[1, 8]]}} for i in range(n)]
    for i, change in odd.items():
        events[i].update(change)
    return {"schemaVersion": 1, "traceEvents": events}


@pytest.mark.parametrize("at", [0, 1500], ids=["first-chunk", "later-chunk"])
def test_kineto_unhashable_names_keep_their_text(at: int, tmp_path: Path) -> None:
    """A name that is a JSON list is the row's name as its text wherever it lies: in the first chunk (decoded as
    any trace's) or a later one (decoded as a Kineto trace's), read whole, streamed or in small blocks."""
    path = tmp_path / "t.json"
    path.write_text(json.dumps(_kineto_ops(2000, {at: {"name": ["a"]}, at + 1: {"cat": ["cpu_op"]}})))
    for table in (detect.read_table(path), detect.read_table(path, block=4096)):
        names = table.name.tolist()
        assert "['a']" in names and not any("\x00" in n for n in names), names
    for block in (4096, 1 << 20):
        folded = detect.read_folded(path, block=block)
        assert isinstance(folded, Folded)
        names = folded.table("name", "sum").name.tolist()
        assert "['a']" in names and not any("\x00" in n for n in names), names


@pytest.mark.parametrize("at", [0, 1500], ids=["first-chunk", "later-chunk"])
def test_kineto_number_out_of_range_is_refused_in_any_chunk(at: int, tmp_path: Path) -> None:
    """An argument the decoder cannot hold (1e400) fails the trace as not valid JSON wherever it lies: a later
    chunk, decoded as a Kineto trace's, refuses it as the first chunk does."""
    path = tmp_path / "t.json"
    text = json.dumps(_kineto_ops(2000, {at: {"args": {"op_name": "NUMBER"}}}))
    path.write_text(text.replace('"NUMBER"', "1e400"))
    with pytest.raises(InputError, match="not valid JSON"):
        detect.read_folded(path, block=4096)
