"""Recurrent layers (ONNX ``LSTM``, ``GRU``, ``RNN``) timed by what the runtime does for them, fitted on the store.

A recurrent layer is two kinds of work. The input projection is one large matrix product over every step
at once (``steps x batch`` rows against the input weights ``W``), which runs near the machine's compute rate.
The recurrence is a small product per step (``batch`` rows against the recurrent weights ``R``), one after
the other: at batch 1 each step streams all of ``R`` from the caches for two FLOPs a weight, so its time
follows the bytes of ``R`` read over the steps, not the FLOPs. One rate per FLOP cannot describe both, and
the trees of :mod:`.model`, learning a rate from a sweep's few dozen recurrent layers, predicted the zoo's
``lstm`` layers x0.74-0.90. So a recurrent layer's time is fitted as a sum of what it does:

    µs = a · (MB of R read over the steps) + b · (recurrent MFLOP) + c · (input-projection MFLOP)
         + d · steps + e

non-negative least squares over the store's layers of the op type, per kind of run (threads, co-runner),
unweighted: the long layers, which decide a model's time, weigh the most; fitted only where the layers' terms
are of enough different shapes to tell every term from the others. Trained on both seeds' kernel sweeps
together it predicts the zoo's ``lstm`` layers x0.93-1.07 of their measured time (x0.83-1.13 on one seed's).

Shapes are read as ONNX lays them out by default: ``X`` ``[steps, batch, input]``, ``W`` ``[directions,
gates x hidden, input]``, ``R`` ``[directions, gates x hidden, hidden]`` (gates: 4 for LSTM, 3 for GRU, 1 for
RNN); ``layout=1``'s batch-first ``X`` is told by its first output, ``Y`` ``[batch, steps, directions,
hidden]`` or, ``Y`` left out, ``Y_h`` ``[batch, directions, hidden]`` (where the two layouts' shapes are the
same, the default is taken). A layer whose shapes do not read so (unknown dims, ``W`` or ``R`` disagreeing with
``X`` or with the op type's gates) has no terms and is predicted by the op type's regressor.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass

import numpy as np

from layerperf.dataset.predict.features import (
    ELEM_BYTES,
    RECURRENT_GATES,
    Op,
    RunFactors,
    is_recurrent,
    shape_at,
    shape_dims,
)

TERMS = ("recurrent_weight_mb", "recurrent_mflop", "input_mflop", "steps", "call")
DISTINCT_ROWS = 2 * len(TERMS)  # layers of different terms a fit needs (repeats of a few shapes pin down nothing)


def terms(op: Op) -> list[float] | None:
    """The layer's :data:`TERMS`; None for a layer that is not a recurrent ONNX op or whose shapes do not read
    as ONNX's default layout."""
    if not is_recurrent(op):
        return None
    ins = shape_dims(op.in_shapes)
    x, w, r = shape_at(ins, 0), shape_at(ins, 1), shape_at(ins, 2)
    if x is None or w is None or r is None or not len(x) == len(w) == len(r) == 3:
        return None
    steps, batch, width = x
    dirs, gated, hidden = r
    y = shape_at(shape_dims(op.out_shapes), 0)
    if y is not None and (len(y) == 4 and y[:3] == [steps, batch, dirs] != [steps, dirs, batch]
                          or len(y) == 3 and y[:2] == [steps, dirs] != [dirs, batch]):
        # layout=1: X [batch, steps, input], Y [batch, steps, dirs, hidden] (or, Y left out, Y_h [batch, dirs,
        # hidden] where layout 0 has [dirs, batch, hidden])
        steps, batch = batch, steps
    if (min(steps, batch, width, dirs, hidden) <= 0 or gated != RECURRENT_GATES[op.op_type] * hidden
            or w[:2] != [dirs, gated] or w[2] != width):
        return None
    elem = ELEM_BYTES.get(op.in_dtypes.split(";")[0] if op.in_dtypes else "", 4)
    per_step = dirs * gated * hidden  # recurrent weights, read at every step
    return [steps * per_step * elem / 1e6, 2.0 * steps * batch * per_step / 1e6,
            2.0 * steps * batch * dirs * gated * width / 1e6, float(steps), 1.0]


@dataclass(frozen=True, slots=True)
class RecurrentFit:
    """Per (op type, kind of run): the fitted coefficients of :data:`TERMS`; ``kind`` tells a run's kind."""

    coef: dict[tuple[str, Hashable], np.ndarray]
    kind: Callable[[RunFactors], Hashable]

    @classmethod
    def of(cls, rows: Iterable[tuple[Op, RunFactors, float]], kind: Callable[[RunFactors], Hashable],
           min_rows: int) -> RecurrentFit:
        """Fitted on ``rows`` (op, run, measured µs), per op type and ``kind(run)``, where there are at least
        ``min_rows`` layers with terms."""
        groups: dict[tuple[str, Hashable], list[tuple[list[float], float]]] = defaultdict(list)
        for op, run, us in rows:
            t = terms(op)
            if t is not None:
                groups[(op.key(run.backend), kind(run))].append((t, us))
        coef = {}
        for key, group in groups.items():
            x = np.array([t for t, _ in group])
            # enough layers, and of shapes enough apart that every term is told from the others
            if (len(group) >= min_rows and len(np.unique(x, axis=0)) >= DISTINCT_ROWS
                    and np.linalg.matrix_rank(x) == len(TERMS)):
                from scipy.optimize import nnls  # installed with scikit-learn (the predict extra)

                coef[key] = nnls(x, np.array([us for _, us in group]))[0]
        return cls(coef, kind)

    def us(self, op: Op, run: RunFactors) -> float | None:
        """The layer's fitted time; None where nothing was fitted for its op type and kind of run, it has no
        terms, or the fit gives it no time."""
        coef = self.coef.get((op.key(run.backend), self.kind(run)))
        t = terms(op) if coef is not None else None
        if coef is None or t is None:
            return None
        us = float(np.dot(coef, t))
        return us if us > 0 else None
