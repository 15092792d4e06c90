"""Cross-entropy, forward and backward, one pass over the logits each (chapter 4 derives it, chapter 6 fuses it).

cross_entropy(x, t, lse, losses)        x: contiguous (R, C) logits, t: int64 (R,) classes;
    lse[r] = log sum_c exp(x[r, c]) (computed as max + log sum exp(x - max)), losses[r] = lse[r] - x[r, t[r]]
cross_entropy_backward(x, t, lse, scale, dx)
    dx[r, c] = (exp(x[r, c] - lse[r]) - [c == t[r]]) * scale       (softmax minus one-hot, in one pass)

Class targets must lie in [0, C): anything else raises IndexError. Both are exercise 4's pieces: their loops are
compiled inside them on the first call.
"""
from __future__ import annotations

import math
from typing import Callable

import numpy as np

from teenygrad.edition import exercise
from teenygrad.kernels.elementwise import u
from teenygrad.kernels.jit import kernel

_COMPILED: dict[str, Callable] = {}  # each piece's loop, compiled on its first call


@exercise("04-classification", "cross_entropy")
def cross_entropy(x: np.ndarray, t: np.ndarray, lse: np.ndarray, losses: np.ndarray) -> None:
    """Per row r of the contiguous (R, C) logits x (R = len(t), C = len(x) // R): lse[r] = log sum_c e^{x[r, c]},
    computed stably as m + log sum_c e^{x[r, c] - m} with m the row's max, and losses[r] = lse[r] - x[r, t[r]],
    the row's -log softmax at its target. lse and losses are float64 (R,). A target outside [0, C) raises
    IndexError."""
    run = _COMPILED.get("cross_entropy")
    if run is None:
        @kernel
        def run(x, t, lse, losses):
            R = t.shape[0]
            C = x.shape[0] // R
            for r in range(R):
                k = t[r]
                if k < 0 or k >= C:
                    raise IndexError("cross_entropy: target class out of range")
                base = r * C
                m = x[u(base)]
                for j in range(1, C):
                    m = max(m, x[u(base + j)])
                total = 0.0
                for j in range(C):
                    total += math.exp(x[u(base + j)] - m)  # every exponent <= 0: no overflow; the max term is 1
                lse[r] = m + math.log(total)
                losses[r] = lse[r] - x[u(base + k)]
        _COMPILED["cross_entropy"] = run
    run(x, t, lse, losses)


@exercise("04-classification", "cross_entropy")
def cross_entropy_backward(x: np.ndarray, t: np.ndarray, lse: np.ndarray, scale: float, dx: np.ndarray) -> None:
    """The gradient of sum_r losses[r] * scale with respect to the logits, from the forward's lse: for the
    contiguous (R, C) x and dx, dx[r, c] = (e^{x[r, c] - lse[r]} - [c == t[r]]) * scale, softmax minus one-hot
    in one pass over each row. A target outside [0, C) raises IndexError."""
    run = _COMPILED.get("cross_entropy_backward")
    if run is None:
        @kernel
        def run(x, t, lse, scale, dx):
            R = t.shape[0]
            C = x.shape[0] // R
            for r in range(R):
                k = t[r]
                if k < 0 or k >= C:
                    raise IndexError("cross_entropy: target class out of range")
                base = r * C
                for j in range(C):
                    dx[u(base + j)] = math.exp(x[u(base + j)] - lse[r]) * scale
                dx[u(base + k)] -= scale
        _COMPILED["cross_entropy_backward"] = run
    run(x, t, lse, scale, dx)
