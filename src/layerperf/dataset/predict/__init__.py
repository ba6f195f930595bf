"""Latency prediction from a store of measurements (``layerperf predict``).

:mod:`.training` reads the store through its documented SQL schema, :mod:`.features` turns a layer and
its run into numbers, :mod:`.graph` finds a model's layers as ONNX Runtime will run them without a timed
run, :mod:`.model` is the predictor (a regressor per op type, a roofline for op types never seen, the
run's cost between layers) and :mod:`.evaluate` its leave-one-model-out evaluation.
"""
