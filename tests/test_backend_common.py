"""What every backend shares (backends/common.py, models/inputs.onnx_input_specs): the interleaved
latency loop, the unknown-FLOPs warning, a model's inputs as input specs."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from layerperf.backends.common import RunTimes, interleaved, timed, unknown_flops_warnings
from layerperf.models.inputs import InputSpec, make_feed, onnx_input_specs


class FakeClock:
    """A clock that each call of a side moves on by the duration that side is set to take."""

    def __init__(self) -> None:
        self.now = 0
        self.calls: list[str] = []

    def __call__(self) -> int:
        return self.now

    def side(self, name: str, dur_ns: int) -> Callable[[], None]:
        def call() -> None:
            self.calls.append(name)
            self.now += dur_ns
        return call


@pytest.mark.parametrize("block", [1, 3])
def test_interleaved_alternates_and_times_each_side(block: int) -> None:
    clock = FakeClock()
    plain, profiled = interleaved(clock.side("plain", 10), clock.side("profiled", 17), 7,
                                  block=block, clock=clock, cpu_clock=clock)
    assert plain.wall_ns == [10] * 7 and profiled.wall_ns == [17] * 7
    assert plain.cpu_ns == [10] * 7 and profiled.cpu_ns == [17] * 7
    expected: list[str] = []
    while len(expected) < 14:
        n = min(block, 7 - len(expected) // 2)
        expected += ["plain"] * n + ["profiled"] * n
    assert clock.calls == expected


def test_without_plain_runs_only_the_profiled_side_is_called_and_timed() -> None:
    clock = FakeClock()
    done: list[int] = []
    plain, profiled = interleaved(None, clock.side("profiled", 5), 4, clock=clock, cpu_clock=clock,
                                  done=done.append)
    assert plain == RunTimes() and profiled.wall_ns == [5] * 4 and profiled.cpu_ns == [5] * 4
    assert clock.calls == ["profiled"] * 4 and done == [1, 2, 3, 4]


def test_progress_is_told_after_each_block() -> None:
    clock = FakeClock()
    done: list[int] = []
    interleaved(clock.side("plain", 1), clock.side("profiled", 2), 5, block=2, clock=clock,
                cpu_clock=clock, done=done.append)
    assert done == [2, 4, 5]
    assert clock.calls == ["plain"] * 2 + ["profiled"] * 2 + ["plain"] * 2 + ["profiled"] * 2 + ["plain", "profiled"]


def test_a_block_below_one_is_refused() -> None:
    with pytest.raises(ValueError, match="block must be at least 1"):
        interleaved(None, lambda: None, 3, block=0)


def test_timed_reads_wall_time_per_call() -> None:
    clock = FakeClock()
    assert timed(clock.side("x", 7), 3, clock) == [7, 7, 7]


def test_unknown_flops_warning_names_each_op_type_once_sorted() -> None:
    assert unknown_flops_warnings([]) == []
    assert unknown_flops_warnings(["Det", "Atan", "Det"]) == ["FLOPs unknown for op types: Atan, Det"]
    assert unknown_flops_warnings(iter(["aten::foo"]), "aten ops") == ["FLOPs unknown for aten ops: aten::foo"]


def _model() -> onnx.ModelProto:
    w = numpy_helper.from_array(np.ones((4, 2), np.float32), "w")
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["y"]), helper.make_node("Add", ["y", "ids"], ["z"])], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 4]),
         helper.make_tensor_value_info("w", TensorProto.FLOAT, [4, 2]),  # an initializer listed as input too
         helper.make_tensor_value_info("ids", TensorProto.INT64, [None, 2])],
        [helper.make_tensor_value_info("z", TensorProto.FLOAT, None)], [w])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_onnx_input_specs_are_the_fed_inputs_as_declared() -> None:
    model = _model()
    assert onnx_input_specs(model) == [InputSpec("x", ("batch", 4), "float32"), InputSpec("ids", (None, 2), "int64")]
    feed = make_feed(model, onnx_input_specs(model), ["ids=3x2"])
    assert feed["x"].shape == (1, 4) and feed["ids"].shape == (3, 2) and feed["ids"].dtype.name == "int64"
