"""Cross-entropy, forward and backward, one pass over the logits each (chapter 4 derives it, chapter 6 fuses it).

cross_entropy(x, t, lse, losses)        x: contiguous (R, C) logits, t: int64 (R,) classes;
    lse[r] = log sum_c exp(x[r, c]) (computed as max + log sum exp(x - max)), losses[r] = lse[r] - x[r, t[r]]
cross_entropy_backward(x, t, lse, scale, dx)
    dx[r, c] = (exp(x[r, c] - lse[r]) - [c == t[r]]) * scale       (softmax minus one-hot, in one pass)

Class targets must lie in [0, C): anything else raises IndexError.
"""
from __future__ import annotations

import math

from teenygrad.kernels.elementwise import u
from teenygrad.kernels.jit import kernel


@kernel
def class_index(k, C):
    if k < 0 or k >= C:
        raise IndexError("cross_entropy: target class out of range")
    return k


@kernel
def cross_entropy(x, t, lse, losses):
    R = t.shape[0]
    C = x.shape[0] // R
    for r in range(R):
        base = r * C
        c = x[u(base)]
        for j in range(1, C):
            v = x[u(base + j)]
            c = v if v > c else c
        total = 0.0
        for j in range(C):
            total += math.exp(x[u(base + j)] - c)  # every exponent <= 0: no overflow; the max term is 1
        lse[r] = c + math.log(total)
        losses[r] = lse[r] - x[u(base + class_index(t[r], C))]


@kernel
def cross_entropy_backward(x, t, lse, scale, dx):
    R = t.shape[0]
    C = x.shape[0] // R
    for r in range(R):
        base = r * C
        for j in range(C):
            dx[u(base + j)] = math.exp(x[u(base + j)] - lse[r]) * scale
        dx[u(base + class_index(t[r], C))] -= scale
