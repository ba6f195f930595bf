"""The data model: the Profile every backend fills and everything after it reads — layers, runs,
typed metadata, the event table (:mod:`~layerperf.data.calls`) and the derived figures."""
