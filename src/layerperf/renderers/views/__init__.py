"""Views of every result layerperf shows, one module per subject.

- :mod:`.profile`: a Profile (the layer table, the summary lines), and layers.csv's rows
- :mod:`.analyze`: ``analyze`` of a trace, per op or per GPU kernel
- :mod:`.diff`: ``diff`` of two traces
- :mod:`.memory`: a memory report
- :mod:`.bench`: bench results
- :mod:`.lists`: the backends, the perf events, the built-in models

Each builds a :class:`~layerperf.renderers.view.View` from the result once; the format modules
(terminal, markdown, csv, json) render it. :mod:`.columns` holds the columns several share.
"""
