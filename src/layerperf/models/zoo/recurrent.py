"""A small recurrent model: two stacked ONNX LSTM ops and a linear classifier.

What it is: a sequence classifier over pre-computed features (no embedding layer). Input
``input`` float32 [seq, batch, 256] (time-major, ONNX LSTM's default layout) runs through two
unidirectional LSTM layers of hidden size 512; the last layer's final hidden state goes through a
Gemm to ``logits`` [batch, 10]. Weights follow PyTorch's LSTM init, U(-1/sqrt(hidden), +).
"""

from __future__ import annotations

import math

from layerperf.models.zoo._graph import GraphBuilder

INPUT_SIZE = 256
HIDDEN_SIZE = 512
NUM_LAYERS = 2
NUM_CLASSES = 10


def _lstm_layer(g: GraphBuilder, x: str, name: str, din: int, *, last: bool) -> str:
    """One ONNX LSTM (gates i, o, f, c stacked in W/R). Returns Y [S, B, H], or Y_h [B, H] when ``last``."""
    bound = 1.0 / math.sqrt(HIDDEN_SIZE)
    weights = g.uniform(f"{name}.W", [1, 4 * HIDDEN_SIZE, din], bound)
    recurrence = g.uniform(f"{name}.R", [1, 4 * HIDDEN_SIZE, HIDDEN_SIZE], bound)
    biases = g.uniform(f"{name}.B", [1, 8 * HIDDEN_SIZE], bound)  # input and recurrent biases
    # Only the needed output is wired: the full sequence Y feeds the next layer, the final state Y_h
    # feeds the classifier. The num_directions axis (1) is squeezed away either way.
    outputs = ["", f"{name}.h_n"] if last else [f"{name}.y"]
    g.op_multi("LSTM", name, [x, weights, recurrence, biases], outputs, hidden_size=HIDDEN_SIZE)
    return g.op("Squeeze", f"{name}.squeeze", outputs[-1], g.ints(0 if last else 1))


def build_lstm(g: GraphBuilder, batch: int, seq: int) -> None:
    """2-layer LSTM (256 -> 512 -> 512) sequence classifier with 10 classes."""
    h = g.input("input", "float32", [seq, batch, INPUT_SIZE])
    din = INPUT_SIZE
    for layer in range(NUM_LAYERS):
        h = _lstm_layer(g, h, f"lstm.{layer}", din, last=layer == NUM_LAYERS - 1)
        din = HIDDEN_SIZE
    bound = 1.0 / math.sqrt(HIDDEN_SIZE)  # nn.Linear's default init range
    weight = g.uniform("classifier.weight", [NUM_CLASSES, HIDDEN_SIZE], bound)
    bias = g.uniform("classifier.bias", [NUM_CLASSES], bound)
    g.op_multi("Gemm", "classifier", [h, weight, bias], ["logits"], transB=1)
    g.output("logits", "float32", [batch, NUM_CLASSES])
