"""The GPU timeline views of a PyTorch trace, one module each, as plain functions over the trace's device
activities returning typed results. Each view is a fold over an :class:`~.source.Activities` source (a
:class:`~layerperf.data.calls.KernelTable` read already is served from memory): it asks for the
activities in blocks, sorted as it needs them, and carries from block to block only a few numbers per
group (per stream, kind, kernel name, step...), so that its memory does not grow with the trace's
length; each module's docstring says what it carries. :mod:`.accumulate` and :mod:`.intervals` hold the
shared accumulators (per-group statistics with median sketches; carried interval unions).

- :mod:`.temporal`: the device's time split into idle, compute and non-compute (per step too);
- :mod:`.idle`: the idle gaps between activities on a stream, by cause (host wait, kernel wait, other);
- :mod:`.kernel_type`: time by kind of kernel (computation, memory, communication, other);
- :mod:`.launch`: what launching cost (CPU launch time, launch delay) and each op's kernel sequence;
- :mod:`.queue`: the launch queue's length per stream, and time spent with it full;
- :mod:`.memcpy`: copies and sets by direction, and their bandwidth over time;
- :mod:`.overlap`: how much communication overlaps computation;
- :mod:`.annotations`: the time of each user annotation (``record_function``, ``ProfilerStep#N``).

Kinds follow Holistic Trace Analysis's rules so figures compare: communication ``^nccl.*Kernel``;
memory ``^Memcpy``, ``^Memset``, ``^dma``; other what contains ``Sync`` or ``Memcpy``; the rest
computation. :data:`VIEWS` names them as ``layerperf analyze --view`` does.
"""

from __future__ import annotations

VIEWS = ("temporal", "idle", "kernel-type", "launch", "queue", "memcpy", "overlap", "annotations")
