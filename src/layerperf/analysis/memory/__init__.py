"""Memory analysis of a Profile: live tensors over the execution order, the peak and where it falls,
and what the runtime really allocated.

>>> import layerperf
>>> prof = layerperf.profile_memory("resnet18", image_size=64)
>>> rep = prof.memory
>>> rep.peak_bytes, rep.peak_node, rep.max_allocated_bytes

The analysis needs only a Profile (:func:`~layerperf.analysis.aggregate.memory.report.memory_report`); the
runtime's own figures come from a fresh session's first runs (:mod:`layerperf.collectors`).
"""
