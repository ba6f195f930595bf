"""layerperf calibrate: the per-machine peaks file, the measuring loop, the command, and % of peak."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import orjson
import pytest

import layerperf
from layerperf.calibration import peaks as calibration
from layerperf.calibration.measure import (
    BYTES,
    FLOPS,
    INT_OPS,
    KERNELS,
    Measured,
    Timed,
    default_threads,
    parse_threads,
    peaks_of,
    stream_bytes_for,
    time_repeats,
)
from layerperf.calibration.peaks import Peaks
from layerperf.cli import main
from layerperf.data import figures
from layerperf.errors import InputError
from layerperf.readers.detect import read_table
from layerperf.renderers.views.analyze import analyze_view
from layerperf.renderers.views.profile import profile_view

SAVED = Path(__file__).parent / "data" / "traces_0_1" / "resnet18_counters_memory" / "trace.json"
SAVED_MACHINE = ("AMD EPYC", 2)  # the fingerprint in SAVED's metadata; its run used 2 threads


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("LAYERPERF_CACHE", str(tmp_path))
    return tmp_path


def peaks(cpu: str = "AMD EPYC", cores: int = 2, **kw: object) -> Peaks:
    base = {"flops_per_s": {1: 5e10, 2: 1e11}, "int_ops_per_s": {1: 2e11, 2: 4e11}, "bytes_per_s": {1: 1e10, 2: 1.5e10},
            "kernels": {"MatMul fp32": {1: 5e10, 2: 1e11}, "Conv fp32": {1: 4e10, 2: 9e10}},
            "measured_at": "2026-11-24T00:00:00+00:00", "onnxruntime": "1.32.0"}
    return Peaks(cpu_model=cpu, cores=cores, **{**base, **kw})  # type: ignore[arg-type]


# -- the file --------------------------------------------------------------------------------------------
def test_save_and_load_round_trip_in_the_cache_directory(cache: Path) -> None:
    p = peaks(quick=True)
    file = calibration.save(p)
    assert file == cache / "calibration" / "amd-epyc-2cores.json"
    assert calibration.load(file) == p
    assert orjson.loads(file.read_bytes())["flops_per_s"] == {"1": 5e10, "2": 1e11}  # JSON keys are strings


def test_one_file_per_machine(cache: Path) -> None:
    assert calibration.machine_key("AMD EPYC 7B13 64-Core Processor", 2) == "amd-epyc-7b13-64-core-processor-2cores"
    assert calibration.machine_key("AMD EPYC", 2) != calibration.machine_key("AMD EPYC", 4)
    a, b = calibration.save(peaks(cores=2)), calibration.save(peaks(cores=4, flops_per_s={4: 3e11}))
    assert a != b and sorted(f.name for f in (cache / "calibration").iterdir()) == [a.name, b.name]
    found = calibration.for_machine({"cpu": "AMD EPYC", "cores": 4})
    assert found is not None and found.flops_per_s == {4: 3e11}
    assert calibration.for_machine({"cpu": "Some other CPU", "cores": 2}) is None  # never calibrated: no figure


def test_cache_variable_is_honoured(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LAYERPERF_CACHE", str(tmp_path / "elsewhere"))
    assert calibration.path("k") == tmp_path / "elsewhere" / "calibration" / "k.json"
    monkeypatch.delenv("LAYERPERF_CACHE")
    assert calibration.path("k") == Path("~/.cache/layerperf/calibration/k.json").expanduser()


@pytest.mark.parametrize(("content", "says"), [
    (b"{not json", "is not JSON"),
    (b'{"format": "something else"}', "is not a layerperf calibration file"),
    (b'{"format": "layerperf-calibration", "version": 99}', "format version 99"),
    (b'{"format": "layerperf-calibration", "version": 1, "cores": 2}', "malformed calibration"),
    (b'{"format": "layerperf-calibration", "version": 1, "cpu_model": "x", "cores": 2, "flops_per_s": {"1": 0}}',
     "not a positive number"),
    (b'{"format": "layerperf-calibration", "version": 1, "cpu_model": "x", "cores": 2, "flops_per_s": [1]}',
     "malformed calibration"),
])
def test_a_malformed_file_is_one_line(tmp_path: Path, content: bytes, says: str) -> None:
    file = tmp_path / "bad.json"
    file.write_bytes(content)
    with pytest.raises(InputError) as err:
        calibration.load(file)
    assert says in str(err.value) and "\n" not in str(err.value)


def test_the_rate_at_a_thread_count_is_the_nearest_measured_below() -> None:
    p = peaks(flops_per_s={1: 1.0, 4: 4.0})
    assert [p.at(p.flops_per_s, t) for t in (1, 2, 3, 4, 16)] == [1.0, 1.0, 1.0, 4.0, 4.0]
    assert p.at(p.flops_per_s, None) == 4.0 and p.threads_at(p.flops_per_s, 3) == 1
    assert p.at({}, 2) is None and p.at({2: 1.0}, 1) is None


# -- measuring -------------------------------------------------------------------------------------------
class FakeClock:
    """Call ``i`` of the kernel takes ``durations_ns[i]`` (the last one from then on); reading the clock takes no
    time. ``waits`` is what the run-queue reader returns, one value per reading."""

    def __init__(self, durations_ns: list[int], waits: list[int]) -> None:
        self.now, self.durations, self.calls, self.waits = 0, list(durations_ns), 0, list(waits)

    def clock(self) -> int:
        return self.now

    def call(self) -> None:
        self.now += self.durations[min(self.calls, len(self.durations) - 1)]
        self.calls += 1

    def waited(self) -> int:
        return self.waits.pop(0) if len(self.waits) > 1 else self.waits[0]


def test_repeats_keep_the_undisturbed_ones_and_the_best_is_the_peak() -> None:
    from layerperf.calibration.measure import QUICK_SIZES, Settings

    ms = 1_000_000
    # 3 single calls sizing the repeats (3 ms: 3 calls each), a warm-up batch of 3, then repeats of 3 calls:
    # 1 ms, 0.5 ms (its threads waited 1 ms for a CPU: set aside), 0.9 ms, 2 ms per call
    durations = [ms] * 9 + [ms // 2] * 3 + [9 * ms // 10] * 3 + [2 * ms] * 3
    waits = [0, 0, 0, 0, ms, ms, ms, ms, ms]  # readings: the check, then before and after each repeat
    fake = FakeClock(durations, waits)
    settings = Settings(threads=(1,), sizes=QUICK_SIZES, repeats=3, min_repeat_s=0.003, warmup_s=0.0)
    timed = time_repeats(fake.call, settings, clock=fake.clock, waited=fake.waited)
    assert timed.loops == 3 and timed.set_aside == 1
    assert timed.per_call_ns == (ms, 9 * ms / 10, 2 * ms)
    assert timed.best_ns == 9 * ms / 10 and timed.median_ns == ms
    both = timed.then(Timed((ms / 2,), 4, 2))  # a later round's repeats join them
    assert both.best_ns == ms / 2 and both.set_aside == 3 and len(both.per_call_ns) == 4


def test_peaks_are_the_best_kernel_of_each_kind_per_thread_count() -> None:
    def m(kernel: str, kind: str, threads: int, ns: float) -> Measured:
        return Measured(kernel, kind, threads, work=1e9, shapes="", ran=kernel, timed=Timed((ns, 3 * ns, 2 * ns), 1))

    measured = [m("MatMul fp32", FLOPS, 1, 1e7), m("Conv fp32", FLOPS, 1, 5e6), m("MatMul fp32", FLOPS, 2, 4e6),
                m("MatMulInteger int8", INT_OPS, 1, 1e6), m("Add fp32", BYTES, 1, 1e8)]
    p = peaks_of(measured, cpu_model="cpu", cores=2, onnxruntime="1", measured_at="t")
    assert p.flops_per_s == {1: 2e11, 2: 2.5e11}  # the Conv at 1 thread, the MatMul at 2
    assert p.int_ops_per_s == {1: 1e12} and p.bytes_per_s == {1: 1e10}
    assert p.kernels["MatMul fp32"] == {1: 1e11, 2: 2.5e11}
    assert measured[0].median_rate == 5e10  # the median repeat beside the best


def test_thread_counts() -> None:
    assert default_threads(1) == (1,) and default_threads(2) == (1, 2)
    assert default_threads(8) == (1, 2, 4, 8) and default_threads(6) == (1, 2, 4, 6)
    assert parse_threads("2, 1,2") == (1, 2)
    for bad in ("0", "a", "1,,2", "-1"):
        with pytest.raises(InputError, match="--threads"):
            parse_threads(bad)


def test_bandwidth_arrays_are_larger_than_the_cache(tmp_path: Path) -> None:
    from layerperf.calibration.measure import last_level_cache_bytes

    for index, size in (("index0", "48K"), ("index2", "2048K"), ("index3", "491520K"), ("index4", "junk")):
        (tmp_path / index).mkdir()
        (tmp_path / index / "size").write_text(size + "\n")
    assert last_level_cache_bytes(tmp_path) == 480 * 2**20
    assert last_level_cache_bytes(tmp_path / "none") is None
    assert stream_bytes_for(480 * 2**20) == 960 * 2**20
    assert stream_bytes_for(None) == stream_bytes_for(2**20) == 64 * 2**20


def test_every_kernel_runs_and_counts_its_work_with_the_cost_model() -> None:
    from layerperf.calibration.measure import QUICK_SIZES, Settings, measure

    settings = Settings(threads=(1,), sizes=QUICK_SIZES, repeats=1, min_repeat_s=0.0, warmup_s=0.0)
    n, c, hw, stream = QUICK_SIZES.matmul_n, QUICK_SIZES.conv_channels, QUICK_SIZES.conv_hw, QUICK_SIZES.stream_bytes
    expected = {"MatMul fp32": 2 * n**3, "Conv fp32": 2 * c * c * 9 * hw * hw,
                "MatMulInteger int8": 2 * QUICK_SIZES.int8_n**3, "QLinearMatMul int8": 2 * QUICK_SIZES.int8_n**3,
                "copy (Identity)": 2 * stream, "Add fp32": 3 * stream}
    for kernel in KERNELS:
        (m,) = measure(kernel, settings, (1,))
        assert m.work == expected[kernel.name], kernel.name
        assert kernel.name.split()[0] in m.ran or m.ran == "Identity"
        assert m.rate > 0


# -- the command -----------------------------------------------------------------------------------------
def test_calibrate_quick_prints_stores_and_shows(cache: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["calibrate", "--quick", "--threads", "1", "--stream-mib", "1"]) == 0
    out = capsys.readouterr().out
    for kernel in KERNELS:
        assert kernel.name in out
    assert "FLOP/s" in out and "OP/s" in out and "GiB/s" in out and "a --quick run" in out
    (file,) = (cache / "calibration").iterdir()
    assert str(file) in out
    stored = calibration.load(file)
    assert stored is not None and stored.quick and set(stored.flops_per_s) == {1}
    assert set(stored.kernels) == {k.name for k in KERNELS}

    assert main(["calibrate", "--show", "--format", "json"]) == 0
    doc = orjson.loads(capsys.readouterr().out)
    assert doc["file"] == str(file) and doc["stored"] and Peaks.from_json(doc["calibration"]) == stored
    assert main(["calibrate", "--show"]) == 0
    shown = capsys.readouterr().out
    assert "MatMul fp32" in shown and "stored in" in shown


def test_calibrate_json_has_the_measurements(cache: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["calibrate", "--quick", "--threads", "1,2", "--stream-mib", "1", "--format", "json"]) == 0
    doc = orjson.loads(capsys.readouterr().out)
    rows = doc["measurements"]
    assert {(r["kernel"], r["threads"]) for r in rows} == {(k.name, t) for k in KERNELS for t in (1, 2)}
    assert all(r["rate"] >= r["median_rate"] > 0 and r["repeats"] == 3 and r["set_aside"] == 0 for r in rows)
    assert set(doc["calibration"]["flops_per_s"]) == {"1", "2"}


def test_quick_never_replaces_a_full_calibration(cache: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from layerperf.data.machine import fingerprint

    fp = fingerprint()
    full = calibration.save(peaks(str(fp["cpu"]), int(fp["cores"])))
    before = full.read_bytes()
    assert main(["calibrate", "--quick", "--threads", "1", "--stream-mib", "1", "--format", "json"]) == 0
    doc = orjson.loads(capsys.readouterr().out)
    assert doc["stored"] is False and doc["file"] == str(full) and full.read_bytes() == before
    assert main(["calibrate", "--quick", "--threads", "1", "--stream-mib", "1"]) == 0
    assert "not stored" in capsys.readouterr().out


def test_show_without_calibration_is_one_line(cache: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["calibrate", "--show"]) == 0
    out = capsys.readouterr().out
    assert out.count("\n") == 1 and "no calibration for this machine" in out


def test_show_with_a_bad_file_is_one_line_exit_2(cache: Path, capsys: pytest.CaptureFixture[str]) -> None:
    file = calibration.path()
    file.parent.mkdir(parents=True)
    file.write_text("{broken")
    assert main(["calibrate", "--show"]) == 2
    captured = capsys.readouterr()
    assert captured.err.count("\n") == 1 and "is not JSON" in captured.err and "Traceback" not in captured.err
    assert main(["calibrate", "--quick", "--threads", "0"]) == 2
    assert "--threads" in capsys.readouterr().err


# -- % of peak ---------------------------------------------------------------------------------------------
def test_peak_pct_float_integer_and_unknown() -> None:
    pct = figures.peak_pcts(
        flops_per_s=[5e10, 1e6, 0.0, np.nan, 2e10], int_ops_per_s=[0.0, 1e11, 0.0, np.nan, np.nan],
        flops=[1e9, 1e3, 0.0, np.nan, 1e9], int_ops=[0.0, 1e8, 0.0, np.nan, np.nan],
        peak_flops_per_s=1e11, peak_int_ops_per_s=4e11)
    assert pct[0] == 50.0  # float work over the float32 peak
    assert pct[1] == 25.0  # a quantized kernel: its int ops over the int8 peak, its requantizing FLOPs aside
    assert math.isnan(pct[2]) and math.isnan(pct[3])  # no work, unknown work: no figure, never 0
    assert pct[4] == 20.0
    assert figures.peak_pct(5e10, None, 1e9, None, None, 4e11) is None  # not calibrated for float work
    assert figures.peak_pct(5e10, None, 1e9, None, 1e11, None) == 50.0


def test_profile_table_gets_percent_of_peak_once_calibrated(cache: Path) -> None:
    prof = layerperf.load(SAVED)
    plain = profile_view(prof, top=None, fmt="table", written={}).sections[0]
    assert "% of peak" not in [c.header for c in plain.columns]
    assert all("pct_of_peak" not in r for r in plain.rows)  # not calibrated: outputs as they were

    calibration.save(peaks(*SAVED_MACHINE, flops_per_s={1: 5e10, 2: 1e11}))
    view = profile_view(prof, top=None, fmt="table", written={})
    section = view.sections[0]
    headers = [c.header for c in section.columns]
    assert headers.index("% of peak") == headers.index("FLOPS") + 1
    for row in section.rows:  # at the run's 2 threads: 1e11
        if row["flops"]:
            assert row["pct_of_peak"] == pytest.approx(row["flops_per_s"] / 1e11 * 100, rel=1e-12)
        else:
            assert row["pct_of_peak"] is None
    assert any(n.text.startswith("% of peak") and "at 2 threads" in n.text for n in section.notes)

    doc = profile_view(prof, top=None, fmt="json", written={}).doc
    layer = next(r for r in doc["layers"] if r["flops"])
    assert layer["pct_of_peak"] == pytest.approx(layer["flops_per_s"] / 1e9, rel=1e-12)
    assert {"flops_per_s", "share", "name", "int_ops_per_s"} <= set(layer)  # existing keys kept


def test_another_machines_calibration_does_not_apply(cache: Path) -> None:
    calibration.save(peaks("Some other CPU", 2))
    rows = profile_view(layerperf.load(SAVED), top=None, fmt="json", written={}).doc["layers"]
    assert all("pct_of_peak" not in r for r in rows)


def test_a_bad_calibration_file_costs_the_column_not_the_profile(cache: Path) -> None:
    file = calibration.path(calibration.machine_key(*SAVED_MACHINE))
    file.parent.mkdir(parents=True)
    file.write_text("[]")
    section = profile_view(layerperf.load(SAVED), top=None, fmt="table", written={}).sections[0]
    assert "% of peak" not in [c.header for c in section.columns]
    assert any(n.kind == "warning" and "% of peak unknown" in n.text for n in section.notes)


def test_analyze_gets_percent_of_peak(cache: Path, capsys: pytest.CaptureFixture[str]) -> None:
    calibration.save(peaks(*SAVED_MACHINE, flops_per_s={1: 5e10, 2: 1e11}))
    view = analyze_view(read_table(SAVED))
    section = view.sections[0]
    assert "% of peak" in [c.header for c in section.columns]
    rated = [r for r in section.rows if r["flops"]]
    assert rated and all(r["pct_of_peak"] == pytest.approx(r["flops_per_s"] / 1e9, rel=1e-12) for r in rated)
    assert main(["analyze", str(SAVED), "--format", "json"]) == 0
    assert all("pct_of_peak" in r for r in orjson.loads(capsys.readouterr().out))
    assert main(["analyze", str(SAVED)]) == 0
    assert "% of peak" in capsys.readouterr().out


def this_machine_peaks(**kw: object) -> Peaks:
    from layerperf.data.machine import fingerprint

    fp = fingerprint()
    return peaks(str(fp["cpu"]), int(fp["cores"]), **kw)


def test_integer_kernels_are_rated_against_the_int8_peak(cache: Path) -> None:
    from test_int_ops import _quantized_model

    calibration.save(this_machine_peaks(flops_per_s={1: 1e10}, int_ops_per_s={1: 1e11}))
    prof = layerperf.profile(_quantized_model(), runs=2, warmup=1, latency=False, opt_level="disable")
    section = profile_view(prof, top=None, fmt="table", written={}).sections[0]
    headers = [c.header for c in section.columns]
    assert headers.index("% of peak") == headers.index("OP/s") + 1  # after the integer rate, when shown
    rows = {r["op_type"]: r for r in section.rows}
    for op in ("QLinearConv", "QLinearMatMul", "MatMulInteger"):  # integer work: int ops/s of the int8 peak
        assert rows[op]["pct_of_peak"] == pytest.approx(rows[op]["int_ops_per_s"] / 1e11 * 100, rel=1e-12)
    for op in ("QuantizeLinear", "DequantizeLinear"):  # float work only
        assert rows[op]["pct_of_peak"] == pytest.approx(rows[op]["flops_per_s"] / 1e10 * 100, rel=1e-12)
    assert rows["Flatten"]["pct_of_peak"] is None  # no work: no figure


def test_profile_cli_json_has_pct_of_peak(cache: Path, tiny_model_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    calibration.save(this_machine_peaks(flops_per_s={1: 1e10, 2: 2e10}))
    assert main(["profile", str(tiny_model_path), "--runs", "2", "--threads", "1", "--no-latency",
                 "--format", "json"]) == 0
    layers = orjson.loads(capsys.readouterr().out)["layers"]
    conv = next(r for r in layers if r["op_type"] == "Conv")
    assert conv["pct_of_peak"] == pytest.approx(conv["flops_per_s"] / 1e10 * 100, rel=1e-12)  # 1 thread's peak


def test_peaks_given_to_a_view_replace_the_cached_ones(cache: Path) -> None:
    calibration.save(peaks(*SAVED_MACHINE, flops_per_s={2: 1e11}))
    prof = layerperf.load(SAVED)
    given = profile_view(prof, top=None, fmt="json", written={}, peaks=peaks(flops_per_s={2: 2e11})).doc["layers"]
    layer = next(r for r in given if r["flops"])
    assert layer["pct_of_peak"] == pytest.approx(layer["flops_per_s"] / 2e11 * 100, rel=1e-12)
    none = profile_view(prof, top=None, fmt="table", written={}, peaks=None).sections[0]
    assert "% of peak" not in [c.header for c in none.columns] and all("pct_of_peak" not in r for r in none.rows)
    rows = analyze_view(read_table(SAVED), peaks=None).sections[0].rows
    assert all("pct_of_peak" not in r for r in rows)


def test_layers_above_the_calibrated_peak_are_flagged() -> None:
    from layerperf.renderers.views import peak

    ref, _ = peak.reference(None, 2, peaks(flops_per_s={1: 5e10, 2: 1e11}, int_ops_per_s={2: 4e11}))
    rows = [{"name": "a", "pct_of_peak": 126.0, "flops": 1e9, "flops_per_s": 1.26e11, "int_ops": 0},
            {"name": "q", "pct_of_peak": 110.0, "flops": 1e3, "flops_per_s": 1e6, "int_ops": 1e9,
             "int_ops_per_s": 4.4e11},
            {"name": "b", "pct_of_peak": 80.0}, {"name": "c", "pct_of_peak": None}]
    (note,) = peak.above_peak(rows, ref, "the median per call of this profile's 5 runs at 2 threads")
    assert note.kind == "warning"
    assert note.text.startswith("2 layers ran above the calibrated peak: a ran at 126.00 GFLOP/s, 126% of the "
                                "float32 FLOP/s peak 100.00 GFLOP/s that the calibration of 2026-11-24 measured "
                                "at 2 threads; its rate is the median per call of this profile's 5 runs at 2 "
                                "threads. The calibration is below"), note.text
    (int_note,) = peak.above_peak(rows[1:], ref, "x")
    assert "q ran at 440.00 GOP/s, 110% of the int8 OP/s peak 400.00 GOP/s" in int_note.text
    assert peak.above_peak(rows[2:], ref, "x") == []


# -- a --quick calibration -----------------------------------------------------------------------------------
def test_a_quick_calibration_is_named_wherever_it_is_used(cache: Path, capsys: pytest.CaptureFixture[str]) -> None:
    calibration.save(peaks(*SAVED_MACHINE, flops_per_s={2: 1e9}, quick=True))  # below any real layer's rate
    section = profile_view(layerperf.load(SAVED), top=None, fmt="table", written={}).sections[0]
    texts = [n.plain() for n in section.notes]
    assert any("the --quick calibration measured on AMD EPYC" in t for t in texts), texts
    assert any(t.startswith("warning: % of peak is over a --quick calibration") and "run `layerperf calibrate` "
               "(without --quick)" in t for t in texts), texts
    above = next(t for t in texts if "ran above the --quick calibrated peak" in t)
    assert "that the --quick calibration of 2026-11-24 measured at 2 threads" in above
    assert "its rate is the median per call of this profile's 3 runs at 2 threads" in above
    assert "run `layerperf calibrate` (without --quick)" in above
    assert main(["analyze", str(SAVED)]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "warning: % of peak is over a --quick calibration" in out
    assert "rows ran above the --quick calibrated peak" in out


def test_calibrate_quick_says_how_to_replace_it(cache: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["calibrate", "--quick", "--threads", "1", "--stream-mib", "1"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "% of peak uses it only while no full calibration exists" in out
    assert "run `layerperf calibrate` (without --quick) on a quiet machine to replace it" in out
    assert main(["calibrate", "--show"]) == 0
    assert "(without --quick)" in capsys.readouterr().out


def test_a_full_calibration_replaces_a_quick_one(cache: Path) -> None:
    quick = calibration.save(this_machine_peaks(quick=True))
    full = calibration.save(this_machine_peaks())
    assert full == quick and not calibration.load(full).quick  # type: ignore[union-attr]


def test_a_quick_calibration_is_named_in_the_report(cache: Path) -> None:
    from layerperf.renderers import html

    calibration.save(peaks(*SAVED_MACHINE, quick=True))
    page = html.html(layerperf.load(SAVED))
    assert "a --quick calibration: small sizes, not this machine&#39;s peaks" in page  # the roofline's line
    assert "% of peak is over a --quick calibration" in page and "(without --quick)" in page  # the warning
