"""Toy backends for the backend contract test (not part of layerperf)."""
