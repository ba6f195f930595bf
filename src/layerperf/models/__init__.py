"""Where a model comes from: an .onnx file (its graph without its weights, its external data), a
built-in zoo model, and the inputs fed to it."""
