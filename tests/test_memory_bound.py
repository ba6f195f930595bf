"""``layerperf analyze`` of a trace several times larger than the memory it may use.

A child process limits its own address space (``RLIMIT_AS``) to :data:`LIMIT_MIB` and analyses a
generated ONNX Runtime profile whose JSON is :data:`TRACE_MIB` (gzipped on disk, so the test writes
little): reading it whole, or unpacking it whole, would need several times the limit. Slow (a minute
or two): runs with ``LAYERPERF_SLOW=1``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zlib
from pathlib import Path

import pytest

LIMIT_MIB = 320
TRACE_MIB = 1200

pytestmark = pytest.mark.slow

CHILD = """
import resource, sys
limit = int(sys.argv[2]) << 20
resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
from layerperf.cli import main
sys.exit(main(["analyze", sys.argv[1], "--format", "json", "--aggregate-by", "type"]))
"""


def _write_trace(path: Path, target_bytes: int) -> tuple[int, int]:
    """An ONNX Runtime profile of ``target_bytes`` of JSON or more, gzipped as it is made; (events, bytes)."""
    args = ('"args":{{"op_name":"{}","provider":"CPUExecutionProvider","input_type_shape":[{{"float":[1,64,56,56]}},'
            '{{"float":[64,64,3,3]}}],"output_type_shape":[{{"float":[1,64,56,56]}}]}}')
    ops = ("Conv", "Relu", "Add", "MatMul")
    z = zlib.compressobj(1, zlib.DEFLATED, 31)
    written = events = 0
    ts = 1000
    with path.open("wb") as f:
        def put(text: str) -> None:
            nonlocal written
            data = text.encode()
            written += len(data)
            f.write(z.compress(data))

        put("[\n")
        while written < target_bytes:
            parts = []
            run_start = ts
            for i in range(200):
                dur = 1 + (i * 37 + events) % 400
                parts.append(f'{{"cat":"Node","name":"node{i}_kernel_time","ph":"X","pid":1,"tid":1,"ts":{ts},'
                             f'"dur":{dur},{args.format(ops[i % 4])}}}')
                ts += dur + 1
            parts.append(f'{{"cat":"Session","name":"model_run","ph":"X","pid":1,"tid":1,"ts":{run_start},'
                         f'"dur":{ts - run_start},"args":{{}}}}')
            events += 201
            put(("," if events > 201 else "") + ",\n".join(parts) + "\n")
        put("]\n")
        f.write(z.flush())
    return events, written


@pytest.mark.skipif(not os.environ.get("LAYERPERF_SLOW"), reason="slow: set LAYERPERF_SLOW=1")
def test_analyze_in_bounded_memory(tmp_path: Path) -> None:
    trace = tmp_path / "big.json.gz"
    events, size = _write_trace(trace, TRACE_MIB << 20)
    assert size >= 3 * (LIMIT_MIB << 20)
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "MALLOC_ARENA_MAX": "2",
           "PYTHONPATH": str(Path(__file__).parent.parent / "src")}
    result = subprocess.run([sys.executable, "-c", CHILD, str(trace), str(LIMIT_MIB)], capture_output=True,
                            text=True, env=env, timeout=1200)
    assert result.returncode == 0, result.stderr[-2000:]
    rows = json.loads(result.stdout)
    assert sorted(r["op_type"] for r in rows) == ["Add", "Conv", "MatMul", "Relu"]
    assert sum(r["calls"] for r in rows) == events - events // 201  # every node call, runs aside


REPORT_LIMIT_MIB = 640

REPORT_CHILD = """
import resource, sys
limit = int(sys.argv[2]) << 20
resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
from layerperf.cli import main
sys.exit(main(["report", sys.argv[1], "-o", sys.argv[3]]))
"""


@pytest.mark.skipif(not os.environ.get("LAYERPERF_SLOW"), reason="slow: set LAYERPERF_SLOW=1")
def test_report_in_bounded_memory(tmp_path: Path) -> None:
    """The HTML report of a trace three times larger than the memory it may use: read streamed."""
    trace, page = tmp_path / "big.json.gz", tmp_path / "big.html"
    events, size = _write_trace(trace, 3 * (REPORT_LIMIT_MIB << 20))
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "MALLOC_ARENA_MAX": "2",
           "PYTHONPATH": str(Path(__file__).parent.parent / "src")}
    result = subprocess.run([sys.executable, "-c", REPORT_CHILD, str(trace), str(REPORT_LIMIT_MIB), str(page)],
                            capture_output=True, text=True, env=env, timeout=1800)
    assert result.returncode == 0, result.stderr[-2000:]
    text = page.read_text()
    runs = events // 201
    assert f"{runs} runs (its model_run events)" in text
    assert f"{events - runs} op calls" in text
