"""benchmarks/bench_repeat.py runs end to end on the JSON bench prints (a short run: no timing is judged)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_repeat.py"


def test_bench_repeat_reports_each_pair_and_the_summary() -> None:
    args = ["--pairs", "1", "--samples", "3", "--min-time", "0.05ms", "--speed-wait", "0"]
    proc = subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, check=False,
                          timeout=120)
    assert proc.returncode in (0, 1), proc.stderr  # 1: the pair disagreed, which a 3-sample run may
    assert "Traceback" not in proc.stderr
    pair = re.search(r"^pair 1: median +([\d.]+) ms .*\| apart +([\d.]+)% (ok|DIFFER)$", proc.stdout, re.M)
    assert pair is not None, proc.stdout
    assert float(pair.group(1)) > 0
    assert (pair.group(3) == "ok") == (proc.returncode == 0)
    assert re.search(r"^[01] of 1 pairs agree within 5%", proc.stdout, re.M)


def test_flags_name_each_warning() -> None:
    sys.path.insert(0, str(SCRIPT.parent))
    try:
        from bench_repeat import flags  # type: ignore[import-not-found]
    finally:
        sys.path.remove(str(SCRIPT.parent))
    doc = {"slowed_used": False, "used_disturbed": False, "cv": 0.01, "n_samples": 100, "requested_samples": 100}
    assert flags(doc) == []
    assert flags({**doc, "slowed_used": True, "cv": 0.2, "n_samples": 40}) == ["SLOWED", "NOISY", "FEW"]
