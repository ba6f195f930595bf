"""Readers turn trace files (layerperf's own, and other tools') into layerperf data."""
