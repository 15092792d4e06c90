"""Optimizer kernels (chapter 7): one fused pass over a parameter per step, updating it in place.

Calling convention: every array is a contiguous 1-D buffer of one parameter's elements (float32 or
float64, all of one dtype): `p` the parameter, `g` its gradient, and the optimizer's state for that
parameter (`buf`, `m`, `v`), which the kernel also updates in place. Scalars are Python floats.

Adam's kernel is exercise 7's piece `teenygrad.optim.adam_update`, defined inside it.

Fusing matters: written as Tensor ops, one Adam step is about ten elementwise ops, each reading and
writing the whole parameter; here every element is read once, updated in registers, and written once.
The arithmetic runs in float64 registers and is rounded once when stored.
"""
from __future__ import annotations

from teenygrad.kernels.jit import kernel


@kernel
def sgd(p, g, buf, lr, momentum, weight_decay):
    """d = g + wd p;  with momentum: buf = momentum buf + d, d = buf;  p -= lr d   (PyTorch's SGD)."""
    for i in range(p.size):
        d = g[i] + weight_decay * p[i]
        if momentum != 0.0:
            b = momentum * buf[i] + d
            buf[i] = b
            d = b
        p[i] = p[i] - lr * d


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
