"""A seeded sample of the onnx package's node test models: each profiles or is refused in one line, none crashes.

benchmarks/node_tests.py runs all of them (``make test-nodes``); this runs 28, drawn with a fixed seed.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
try:
    import node_tests  # type: ignore[import-not-found]
finally:
    sys.path.pop(0)

SAMPLE, SEED = 28, 0  # 40 took 36 s of the suite; every model runs in `make test-nodes`


@pytest.fixture(scope="module")
def outcomes() -> list[node_tests.Outcome]:
    return node_tests.run_all(node_tests.sample(node_tests.cases(), SAMPLE, SEED))


def test_no_node_model_crashes(outcomes: list[node_tests.Outcome]) -> None:
    crashed = [f"{o.name}: {o.message}" for o in outcomes if o.status == "crashed"]
    assert not crashed, "\n".join(crashed)
    assert len(outcomes) == SAMPLE


def test_refusals_are_one_line_and_most_profile(outcomes: list[node_tests.Outcome]) -> None:
    refused = [o for o in outcomes if o.status == "refused"]
    assert all(o.message and "\n" not in o.message and "Traceback" not in o.message for o in refused)
    # over the whole suite about 93% profile; a sample with under 3/4 profiled means something broke
    assert sum(o.status == "profiled" for o in outcomes) >= 0.75 * SAMPLE


def test_summary_counts_and_groups_reasons() -> None:
    outs = [node_tests.Outcome("a", "profiled"),
            node_tests.Outcome("b", "refused", "ONNX Runtime cannot load /t/b.onnx: x"),
            node_tests.Outcome("c", "refused", "ONNX Runtime cannot load /t/c.onnx: x"),
            node_tests.Outcome("d", "crashed", "TypeError: bad 'x' [inputs.py:9]")]
    lines = node_tests.summary(outs, 1.0)
    assert lines[0] == "4 node test models in 1.0 s: 1 profiled, 2 refused, 1 crashed"
    assert "      2  ONNX Runtime cannot load PATH: x" in lines
    assert lines[-2:] == ["crashed by reason:", "      1  TypeError: bad '…' [inputs.py:N]"]
