"""The optimizers' updates and gradient clipping on the GPU (chapter 11), with the CPU pieces' arguments and arithmetic
(`teenygrad.optim.sgd_update`, `adam_update`; teenygrad/kernels/optim.py) on 1-D numba-cuda device arrays.

    sgd_update(p, g, buf, lr, momentum, weight_decay)                         p, buf updated in place
    adam_update(p, g, m, v, lr, beta1, beta2, eps, weight_decay, decoupled, t) p, m, v updated in place
    sum_of_squares(g) -> float                                                 accumulated in float64
    scale(g, coef)                                                             g *= coef in place

Each update is one elementwise pass, one thread an element (grid-stride). The scalars are folded on the host as the
CPU piece folds them and handed over in the parameter's dtype: Python floats would make a float32 update compute in
float64, which consumer GPUs run at a fraction of float32's speed.
"""
from __future__ import annotations

import math

import numpy as np

from teenygrad.kernels.cuda.device import SIMULATED, cuda
from teenygrad.kernels.cuda.fused import THREADS
from teenygrad.kernels.cuda.launch import launch_config
from teenygrad.kernels.cuda.reduce import block_sum

PARTIALS = 8 if SIMULATED else 1024  # blocks of sum_of_squares at most: each leaves one partial sum


def _grid(n: int) -> tuple:
    return launch_config((n,), THREADS)


@cuda.jit
def sgd_kernel(p, g, buf, lr, momentum, weight_decay):
    for i in range(cuda.grid(1), p.shape[0], cuda.gridsize(1)):
        d = g[i] + weight_decay * p[i]
        if momentum != 0:  # the same for every thread: no divergence
            b = momentum * buf[i] + d
            buf[i] = b
            d = b
        p[i] = p[i] - lr * d


def sgd_update(p, g, buf, lr: float, momentum: float, weight_decay: float) -> None:
    """One step of SGD for one parameter: d = g + weight_decay p; with momentum buf = momentum buf + d, d = buf;
    p -= lr d. buf is empty when momentum is 0."""
    n = p.shape[0]
    if n:
        t = np.dtype(p.dtype).type
        grid, block = _grid(n)
        # without momentum the kernel never touches buf, which is then empty: g stands in for it, so that no
        # zero-size array is launched with
        sgd_kernel[grid, block](p, g, buf if momentum else g, t(lr), t(momentum), t(weight_decay))


@cuda.jit
def adam_kernel(p, g, m, v, step, inv_root_bias2, shrink, l2, beta1, one_minus_beta1, beta2, one_minus_beta2, eps):
    for i in range(cuda.grid(1), p.shape[0], cuda.gridsize(1)):
        pi = p[i]
        gi = g[i] + l2 * pi
        mi = beta1 * m[i] + one_minus_beta1 * gi
        vi = beta2 * v[i] + one_minus_beta2 * gi * gi
        m[i] = mi
        v[i] = vi
        p[i] = pi * shrink - step * mi / (math.sqrt(vi) * inv_root_bias2 + eps)


def adam_update(p, g, m, v, lr: float, beta1: float, beta2: float, eps: float, weight_decay: float, decoupled: bool,
                t: int) -> None:
    """Step t of Adam (decoupled=False: L2 decay folded into the gradient) or AdamW (decoupled=True: p shrinks by
    lr * weight_decay first) for one parameter; p, m, v updated in place."""
    n = p.shape[0]
    if not n:
        return
    # the CPU piece's folding: the choice of decay becomes two numbers, the bias corrections two more
    shrink = 1.0 - lr * weight_decay if decoupled else 1.0
    l2 = 0.0 if decoupled else weight_decay
    bias1, bias2 = 1.0 - beta1 ** t, 1.0 - beta2 ** t
    f = np.dtype(p.dtype).type
    grid, block = _grid(n)
    adam_kernel[grid, block](p, g, m, v, f(lr / bias1), f(1.0 / math.sqrt(bias2)), f(shrink), f(l2), f(beta1),
                             f(1.0 - beta1), f(beta2), f(1.0 - beta2), f(eps))


@cuda.jit
def sum_of_squares_kernel(g, partial):
    """partial[block] = the sum of g_i^2 over the elements this block's threads visit, in float64 throughout."""
    part = cuda.shared.array(THREADS, dtype=np.float64)
    s = np.float64(0.0)
    for i in range(cuda.grid(1), g.shape[0], cuda.gridsize(1)):
        x = np.float64(g[i])
        s += x * x
    s = block_sum(part, cuda.threadIdx.x, THREADS, s)
    if cuda.threadIdx.x == 0:
        partial[cuda.blockIdx.x] = s


def sum_of_squares(g) -> float:
    """sum g_i^2 over a 1-D device array, as a Python float: each block reduces its share in shared memory, then the
    host adds the blocks' partial sums (at most PARTIALS of them)."""
    n = g.shape[0]
    if not n:
        return 0.0
    blocks = min(-(-n // THREADS), PARTIALS)
    partial = cuda.device_array(blocks, dtype=np.float64)  # scratch: one number a block
    sum_of_squares_kernel[blocks, THREADS](g, partial)
    return float(np.sum(partial.copy_to_host(), dtype=np.float64))


@cuda.jit
def scale_kernel(g, coef):
    for i in range(cuda.grid(1), g.shape[0], cuda.gridsize(1)):
        g[i] = g[i] * coef


def scale(g, coef: float) -> None:
    """g *= coef in place (gradient clipping)."""
    n = g.shape[0]
    if n:
        grid, block = _grid(n)
        scale_kernel[grid, block](g, np.dtype(g.dtype).type(coef))


KERNELS = {"sgd_update": sgd_update, "adam_update": adam_update, "sum_of_squares": sum_of_squares, "scale": scale}
