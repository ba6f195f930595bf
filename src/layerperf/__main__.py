from layerperf.cli import entry

entry()
