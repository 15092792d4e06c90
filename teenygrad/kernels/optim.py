"""Gradient clipping's kernels (chapter 7): the sum of squares of a gradient and its scaling, in place.

Calling convention: a contiguous 1-D buffer of one parameter's gradient (float32 or float64); scalars are Python
floats. The optimizers' own updates, one fused pass per parameter that updates it in place, are exercise 7's
pieces `teenygrad.optim.sgd_update` and `teenygrad.optim.adam_update`, each with its kernel defined inside it.
"""
from __future__ import annotations

from teenygrad.kernels.jit import kernel


@kernel
def sum_of_squares(g):
    """sum g_i^2, accumulated in float64 (for the gradient norm)."""
    s = 0.0
    for i in range(g.size):
        s += g[i] * g[i]
    return s


@kernel
def scale(g, c):
    """g *= c in place (gradient clipping)."""
    for i in range(g.size):
        g[i] = g[i] * c
