"""Optimizer kernels (chapter 7): one fused pass over a parameter per step, updating it in place.

Calling convention: every array is a contiguous 1-D buffer of one parameter's elements (float32 or
float64, all of one dtype): `p` the parameter, `g` its gradient, and the optimizer's state for that
parameter (`buf`, `m`, `v`), which the kernel also updates in place. Scalars are Python floats.

Fusing matters: written as Tensor ops, one Adam step is about ten elementwise ops, each reading and
writing the whole parameter; here every element is read once, updated in registers, and written once.
The arithmetic runs in float64 registers and is rounded once when stored.
"""
from __future__ import annotations

import math

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


@kernel(numpy_errors=True)  # no zero-divisor check per element: the loop vectorises (about 9x faster)
def adam(p, g, m, v, lr, beta1, beta2, eps, weight_decay, decoupled, bias1, bias2):
    """Adam (decoupled=False: L2, g += wd p) or AdamW (decoupled=True: p -= lr wd p first):
        m = b1 m + (1 - b1) g,   v = b2 v + (1 - b2) g^2,
        p -= lr (m / bias1) / (sqrt(v / bias2) + eps)       with bias_k = 1 - b_k^t at step t.
    The scalars are folded before the loop (PyTorch's arrangement, the same value up to rounding), and the
    choice between the two decays becomes two numbers, so the loop has no branch, one sqrt and one division."""
    step = lr / bias1
    inv_root_bias2 = 1.0 / math.sqrt(bias2)
    shrink = 1.0 - lr * weight_decay if decoupled else 1.0  # AdamW: p *= 1 - lr wd
    l2 = 0.0 if decoupled else weight_decay                 # Adam: g += wd p
    for i in range(p.size):
        pi = p[i]
        gi = g[i] + l2 * pi
        mi = beta1 * m[i] + (1.0 - beta1) * gi
        vi = beta2 * v[i] + (1.0 - beta2) * gi * gi
        m[i] = mi
        v[i] = vi
        p[i] = pi * shrink - step * mi / (math.sqrt(vi) * inv_root_bias2 + eps)


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
