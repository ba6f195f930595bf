"""Counts attributed node by node add up to the pass they came from: task-clock (a software event, no
PMU needed) summed over a stepwise pass's nodes against the same counter group read around the whole
pass, at 1 and 2 intra-op threads, in three repetitions each.

The relation is the one the code guarantees: the nodes' intervals are disjoint parts of the pass's,
and every thread's task-clock only grows, so the nodes' sum never exceeds the pass; what the pass has
beyond it is the CPU time between the node boundaries (the executor's own few µs a node and the
counter reads). So the sum is at most the pass and at least (1 - TOLERANCE) of it with nodes that take
milliseconds. CPU time, not wall time: a busy host delays the pass but adds nothing to either side.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

TOLERANCE = 0.15  # of the pass's task-clock: what the code between node boundaries may take at most (4-7% seen)
REPETITIONS = 3

SCRIPT = """
import gc, json, sys
import numpy as np
import onnxruntime.capi._pybind_state as state
threads = int(sys.argv[2])
state.set_global_thread_pool_sizes(threads, 1)  # as the counting worker does
sys.path.insert(0, sys.argv[1])
from test_counters_profile import matmul_chain, X_SHAPE
from layerperf.backends.ort.stepwise import StepwiseExecutor
from layerperf.collectors.perf import PerfCounters
from layerperf.counters import CounterSet
ex = StepwiseExecutor(matmul_chain(), ["mm1", "relu", "mm2"], global_threads=True)
feed = {"x": np.ones(X_SHAPE, np.float32)}
for _ in range(3):  # sessions built, calls bound
    ex.run_pass(feed)
out = []
with CounterSet(["task-clock"], threads="all") as cs:
    cs.enable()
    for _ in range(int(sys.argv[3])):
        collector = PerfCounters(cs)
        gc.disable()  # a collection between two nodes would be CPU time of neither
        start = cs.read()
        ex.run_pass(feed, collector=collector)
        whole = (cs.read() - start)["task-clock"]
        gc.enable()
        nodes = [per_pass[0] for per_pass in collector.tally(3).counts["task-clock"]]
        out.append({"whole": whole, "nodes": nodes, "threads": len(cs.threads)})
print(json.dumps(out))
"""


@pytest.mark.parametrize("threads", [1, 2])
def test_task_clock_over_nodes_adds_up_to_the_pass(threads: int) -> None:
    proc = subprocess.run([sys.executable, "-c", SCRIPT, str(Path(__file__).parent), str(threads),
                           str(REPETITIONS)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    passes = json.loads(proc.stdout.splitlines()[-1])
    assert len(passes) == REPETITIONS
    for p in passes:
        total = sum(p["nodes"])
        assert all(n > 0 for n in p["nodes"]), p
        assert total <= p["whole"], p  # disjoint parts of the pass
        assert total >= (1 - TOLERANCE) * p["whole"], p
    if threads == 2:
        assert passes[0]["threads"] >= 2  # the pool's worker was counted too
