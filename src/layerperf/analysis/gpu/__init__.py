"""The GPU timeline views of a PyTorch trace, one module each, as plain functions over the event table's
device activities (:class:`~layerperf.data.calls.KernelTable`) returning typed results:

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
