"""The TVM backend's TVM-free parts on fixed inputs: the VM bytecode read back, call sites and their
JSON, the memory accounting of a run, a MetaSchedule trace read into a schedule record."""

from __future__ import annotations

import pytest

from layerperf.backends.tvm.bytecode import main_function, parse
from layerperf.backends.tvm.calls import CallMap, CallSite, CallTensors, serving
from layerperf.backends.tvm.kernel_cost import site_costs
from layerperf.backends.tvm.memory import alloc_nbytes, events, summarize
from layerperf.backends.tvm.schedule import DEFAULT, TUNED, default_schedule, read_trace
from layerperf.data.cost import Cost
from layerperf.data.tensor import TensorInfo
from layerperf.errors import BackendError

# What VMExecutable.as_text() printed for Conv -> BatchNorm+Relu+Reshape -> MatMul+Add (TVM 0.27).
BYTECODE = """@main:
  call  vm.builtin.check_tensor_info in: %0, i4, c[0], c[1] dst: %void
  call  vm.builtin.match_shape in: %0, %void, i4, i0, i1, i0, i3, i0, i8, i0, i8, c[1] dst: %void
  call  vm.builtin.alloc_storage in: %vm, c[2], i0, c[3], c[4] dst: %1
  call  vm.builtin.alloc_tensor in: %1, i0, c[5], c[0] dst: %2
  call  vm.builtin.null_value in:              dst: %1
  call  conv2d           in: %0, c[6], %2 dst: %void
  call  vm.builtin.alloc_storage in: %vm, c[2], i0, c[3], c[4] dst: %3
  call  vm.builtin.alloc_tensor in: %3, i0, c[7], c[0] dst: %4
  call  vm.builtin.null_value in:              dst: %3
  call  fused_batch_norm_relu_reshape in: %2, c[8], c[9], c[9], c[8], %4 dst: %void
  call  vm.builtin.null_value in:              dst: %2
  call  vm.builtin.alloc_storage in: %vm, c[10], i0, c[3], c[4] dst: %5
  call  vm.builtin.alloc_tensor in: %5, i0, c[11], c[0] dst: %6
  call  vm.builtin.null_value in:              dst: %5
  call  fused_matmul_add in: %4, c[12], c[13], %6 dst: %void
  call  vm.builtin.null_value in:              dst: %4
  ret   %6

@vm.builtin.check_tensor_info packed_func;

@conv2d packed_func;
"""
SIZES = {2: 1024, 3: 1024, 6: 1024, 7: 1024, 11: 40, 12: 40}  # call -> bytes, as the hook saw them


def test_bytecode_is_read_back() -> None:
    funcs = parse(BYTECODE)
    assert list(funcs) == ["main"]
    main = funcs["main"]
    assert len(main.calls) == 16 and main.ret == "%6" and main.straight
    assert main.calls[5].func == "conv2d" and main.calls[5].args == ("%0", "c[6]", "%2") and main.calls[5].dst is None
    assert main.calls[4].func == "vm.builtin.null_value" and main.calls[4].args == () and main.calls[4].dst == "%1"
    assert main.calls[2].registers() == []  # %vm is no register


def test_branches_are_noticed_and_a_missing_main_is_an_error() -> None:
    assert not parse("@main:\n  call  f in: %0 dst: %1\n  goto  2\n  ret   %1\n")["main"].straight
    with pytest.raises(BackendError, match="no VM function 'main'"):
        main_function("@other:\n  ret   %0\n")


def test_builtins_serve_their_kernels() -> None:
    funcs = [c.func for c in main_function(BYTECODE).calls]
    serves = serving(funcs)
    assert serves[2] == serves[3] == 5  # the allocations made for conv2d
    assert serves[4] is None  # a free before any kernel ran
    assert serves[10] == 9 and serves[15] == 14  # frees after the kernel that last used the value
    assert serves[0] is None and serves[5] is None


def test_memory_of_a_run() -> None:
    evs, retained = events(main_function(BYTECODE), SIZES)
    storage = [e for e in evs if e.kind == "storage"]
    # conv2d's block lives until its output is freed after the second kernel (call 10).
    assert [(e.call, e.nbytes) for e in storage] == [(2, 1024), (6, 1024), (10, -1024), (11, 40), (15, -1024)]
    assert retained == 40  # the output's block
    mem = summarize(evs, retained)
    assert mem.allocated_bytes == 2088 and mem.blocks == 3 and mem.tensors == 3
    assert mem.peak_allocated_bytes == 2048 and mem.peak_used_bytes == 2048 and mem.peak_call == 7
    assert mem.per_call == {2: 1024, 6: 1024, 11: 40}


def test_a_view_keeps_its_block_alive() -> None:
    text = """@main:
  call  vm.builtin.alloc_storage in: %vm, c[0], i0, c[1], c[2] dst: %1
  call  vm.builtin.alloc_tensor in: %1, i0, c[3], c[4] dst: %2
  call  vm.builtin.null_value in:              dst: %1
  call  vm.builtin.reshape in: %2, c[5] dst: %3
  call  vm.builtin.null_value in:              dst: %2
  call  k in: %3, %4 dst: %void
  call  vm.builtin.null_value in:              dst: %3
  ret   %4
"""
    evs, _ = events(main_function(text), {0: 64, 1: 64})
    assert [(e.call, e.nbytes, e.kind) for e in evs] == [(0, 64, "storage"), (1, 64, "tensor"), (6, -64, "tensor"),
                                                         (6, -64, "storage")]


def test_allocation_sizes_from_the_hook_arguments() -> None:
    assert alloc_nbytes("vm.builtin.alloc_storage", (None, (1024,), 0, "uint8", "global")) == 1024
    assert alloc_nbytes("vm.builtin.alloc_tensor", (None, 0, (1, 4, 8, 8), "float32")) == 1024
    assert alloc_nbytes("vm.builtin.null_value", ()) is None
    assert alloc_nbytes("vm.builtin.alloc_tensor", (None,)) is None


def test_call_map_round_trips_through_json() -> None:
    cmap = CallMap((CallSite(0, "vm.builtin.alloc_storage", serves=1), CallSite(1, "conv2d", (0, 1), 2)),
                   ("kernel", "kernel", "import"), ("a warning",))
    assert CallMap.from_json(cmap.to_json()) == cmap
    assert cmap.coverage() == {"kernel": 2, "folded": 0, "import": 1, "unmapped": 0}
    assert [s.func for s in cmap.kernels()] == ["conv2d"] and cmap.sites_of(1)[0].call == 1


def test_a_node_split_over_calls_is_costed_once_at_its_last() -> None:
    cmap = CallMap((CallSite(0, "maximum", (0,), 1), CallSite(1, "minimum", (0,), 1),
                    CallSite(2, "vm.builtin.null_value")), ("kernel",))
    t = TensorInfo("t", (1, 4), "float32")
    tensors = [CallTensors((t,), (t,)), CallTensors((t,), (t,)), CallTensors((), ())]
    costs = site_costs(cmap, [Cost(8, 16, 16, 0)], tensors)
    assert costs[0].flops == 0 and costs[1].flops == 8  # counted where the node's output is written
    assert costs[1].bytes_read == 16 and costs[1].bytes_written == 16
    assert costs[2].flops == 0 and costs[2].bytes_read is None


# One MetaSchedule trace of a conv2d task, as Trace.as_python() printed it (cut to what is read).
TRACE = [
    'b0 = sch.get_sblock(name="pad_temp", func_name="main")',
    'b1 = sch.get_sblock(name="conv2d_nchw", func_name="main")',
    'b2 = sch.get_sblock(name="root", func_name="main")',
    "sch.compute_inline(block=b0)",
    'sch.annotate(block_or_loop=b1, ann_key="meta_schedule.tiling_structure", ann_val="SSRSRS")',
    "l3, l4, l5 = sch.get_loops(block=b1)",
    "v6, v7, v8, v9 = sch.sample_perfect_tile(loop=l4, n=4, max_innermost_factor=64, decision=[8, 8, 8, 1])",
    "l10, l11, l12, l13 = sch.split(loop=l4, factors=[v6, v7, v8, v9], preserve_unit_iters=True)",
    "v14, v15 = sch.sample_perfect_tile(loop=l5, n=2, max_innermost_factor=64, decision=[8, 32])",
    "l16, l17 = sch.split(loop=l5, factors=[v14, v15], preserve_unit_iters=True)",
    "sch.reorder(l3, l10, l11, l16, l12, l17, l13)",
    'b18 = sch.cache_write(block=b1, write_buffer_index=0, storage_scope="global")',
    "sch.reverse_compute_at(block=b18, loop=l11, preserve_unit_loops=True, index=-1)",
    'sch.annotate(block_or_loop=b2, ann_key="meta_schedule.parallel", ann_val=16)',
    'sch.annotate(block_or_loop=b2, ann_key="meta_schedule.vectorize", ann_val=64)',
    "v19 = sch.sample_categorical(candidates=[0, 16, 64, 512], probs=[0.25, 0.25, 0.25, 0.25], decision=2)",
    'sch.annotate(block_or_loop=b2, ann_key="meta_schedule.unroll_explicit", ann_val=v19)',
    "sch.enter_postproc()",
    'sch.unannotate(block_or_loop=b2, ann_key="meta_schedule.parallel")',
]


def test_a_trace_becomes_a_schedule_record() -> None:
    s = read_trace("conv2d1", TRACE, {"conv2d_nchw": ["nn", "ff", "rc"]}, run_s=1e-4)
    assert s.source == TUNED and s.func == "conv2d1" and s.run_s == 1e-4
    assert [(t.block, t.loop, t.factors) for t in s.tiles] == [("conv2d_nchw", "ff", (8, 8, 8, 1)),
                                                               ("conv2d_nchw", "rc", (8, 32))]
    assert s.loop_order == (("conv2d_nchw", ("nn", "ff_0", "ff_1", "rc_0", "ff_2", "rc_1", "ff_3")),)
    assert [(p.block, p.how, p.loop) for p in s.placements] == [("pad_temp", "inline", None),
                                                                ("conv2d_nchw_global", "reverse_compute_at", "ff_1")]
    assert s.max_parallel_jobs_per_core == 16 and s.max_vectorize_extent == 64
    assert s.unroll_max_step == 64 and s.unroll_explicit is True
    assert s.to_json()["tiles"][0] == {"block": "conv2d_nchw", "loop": "ff", "factors": [8, 8, 8, 1]}


def test_loops_keep_their_rv_names_when_the_block_is_unknown() -> None:
    s = read_trace("k", TRACE)
    assert s.tiles[0].loop == "l4" and s.loop_order[0][1][:2] == ("l3", "l4_0")


def test_untuned_kernels_say_default_schedule() -> None:
    s = default_schedule("conv2d")
    assert s.source == DEFAULT == "default schedule" and not s.tiles and s.parallel_extent is None
