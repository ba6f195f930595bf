"""Everything layerperf shows or writes, one module per output format.

A command's result is built once into a :class:`~layerperf.renderers.view.View` (in
:mod:`layerperf.renderers.views`, one module per subject); the format modules render it:
:mod:`.terminal` (rich), :mod:`.markdown`, :mod:`.csv`, :mod:`.json`, each stating its name and
file suffix. :mod:`.output` picks one by ``--format`` or by the ``--output`` file's suffix.

The files a profile writes: :mod:`.chrome` (trace.json), :mod:`.csv` (layers.csv), :mod:`.svg`
(the memory pictures), saved together by :mod:`.files`.
"""
