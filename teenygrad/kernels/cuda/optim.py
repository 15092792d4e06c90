"""The optimizers' updates and gradient clipping on the GPU (chapter 11), with the CPU pieces' arguments and arithmetic
(`teenygrad.optim.sgd_update`, `adam_update`; teenygrad/kernels/optim.py) on 1-D numba-cuda device arrays.

    sgd_update(p, g, buf, lr, momentum, weight_decay)                         p, buf updated in place
    adam_update(p, g, m, v, lr, beta1, beta2, eps, weight_decay, decoupled, t) p, m, v updated in place
    sum_of_squares(g) -> float                                                 accumulated in float64
    scale(g, coef)                                                             g *= coef in place

Each update is one elementwise pass, one thread an element (grid-stride). The scalars are folded on the host as the
CPU piece folds them and handed over in the parameter's dtype: Python floats would make a float32 update compute in
float64, which consumer GPUs run at a fraction of float32's speed.

A model has dozens of parameters, most of them small: one launch each would make the optimizer and the clipping a
third of a GPT step's launches, and each parameter's sum of squares a wait for the GPU. So every kernel here takes a
whole list of parameters, GROUP of them a launch (PyTorch's "foreach" kernels), and the one-parameter entries above
call it with a list of one. The list entries:

    sgd_update_group(ps, gs, bufs, lr, momentum, weight_decay)
    adam_update_group(ps, gs, ms, vs, lr, beta1, beta2, eps, weight_decay, decoupled, ts)   ts: each one's step
    sum_of_squares_group(gs) -> float          one copy back for the whole list
    scale_group(gs, coef)

A group's arrays go to the kernel as a tuple, the grid's y axis picks one (blockIdx.y), and its x axis runs over that
one's elements as before. Lists of one dtype; a list longer than GROUP takes several launches.
"""
from __future__ import annotations

import math

import numpy as np

from teenygrad.kernels.cuda.device import SIMULATED, cuda
from teenygrad.kernels.cuda.fused import THREADS
from teenygrad.kernels.cuda.launch import launch_config
from teenygrad.kernels.cuda.reduce import block_sum

PARTIALS = 8 if SIMULATED else 1024  # blocks of sum_of_squares at most: each leaves one partial sum


# ---- a list of parameters, GROUP a launch ----------------------------------------------------------------------

GROUP = 16  # arrays one launch takes: a fixed count (short groups repeat their first array), so that numba compiles
# each group kernel once, not once for every length a model's parameter list has. Adam's kernel then takes 3,740 bytes
# of arguments (an array is 7 numbers: 4 arrays x 16 x 56 bytes, and the scalars), under the 4 KB a launch may pass
# on every CUDA version (measured in its PTX for sm_90): a larger GROUP would not fit.


def _groups(n: int):
    """The index ranges of the launches for n arrays: GROUP at a time."""
    return [range(start, min(start + GROUP, n)) for start in range(0, n, GROUP)]


def _tuple(items: list, rows: range) -> tuple:
    """items[rows] as a tuple of exactly GROUP, padded with its first (the kernel never reads past len(rows))."""
    picked = [items[i] for i in rows]
    return tuple(picked + [picked[0]] * (GROUP - len(picked)))


def _group_grid(arrays: list, rows: range, cap: int | None = None) -> tuple:
    """(grid, block): x blocks enough for the largest array of the group (at most `cap`), y one row a member."""
    (blocks, _, _), (threads, _, _) = launch_config((max(arrays[i].shape[0] for i in rows),), THREADS)
    return (blocks if cap is None else min(blocks, cap), len(rows)), threads


def _same_dtype(arrays: list, what: str) -> None:
    dtypes = sorted({str(a.dtype) for a in arrays})
    if len(dtypes) > 1:
        raise TypeError(f"{what}: the arrays of one call must share a dtype, got {dtypes}")


@cuda.jit
def sgd_group_kernel(ps, gs, bufs, lr, momentum, weight_decay):
    p, g, buf = ps[cuda.blockIdx.y], gs[cuda.blockIdx.y], bufs[cuda.blockIdx.y]
    for i in range(cuda.threadIdx.x + cuda.blockIdx.x * cuda.blockDim.x, p.shape[0], cuda.blockDim.x * cuda.gridDim.x):
        d = g[i] + weight_decay * p[i]
        if momentum != 0:
            b = momentum * buf[i] + d
            buf[i] = b
            d = b
        p[i] = p[i] - lr * d


def sgd_update_group(ps: list, gs: list, bufs: list, lr: float, momentum: float, weight_decay: float) -> None:
    """`sgd_update` for every (p, g, buf) of three lists, GROUP parameters a launch."""
    ps, gs = list(ps), list(gs)
    bufs = list(bufs) if momentum else gs  # without momentum the kernel never reads buf (then empty): g stands in
    kept = [i for i in range(len(ps)) if ps[i].shape[0]]
    ps, gs, bufs = [ps[i] for i in kept], [gs[i] for i in kept], [bufs[i] for i in kept]
    _same_dtype(ps, "sgd_update_group")
    for rows in _groups(len(ps)):
        t = np.dtype(ps[0].dtype).type
        sgd_group_kernel[_group_grid(ps, rows)](_tuple(ps, rows), _tuple(gs, rows), _tuple(bufs, rows), t(lr),
                                                t(momentum), t(weight_decay))


@cuda.jit
def adam_group_kernel(ps, gs, ms, vs, steps, inv_roots, shrink, l2, beta1, one_minus_beta1, beta2, one_minus_beta2,
                      eps):
    j = cuda.blockIdx.y
    p, g, m, v = ps[j], gs[j], ms[j], vs[j]
    step, inv_root_bias2 = steps[j], inv_roots[j]  # each parameter's own step count t
    for i in range(cuda.threadIdx.x + cuda.blockIdx.x * cuda.blockDim.x, p.shape[0], cuda.blockDim.x * cuda.gridDim.x):
        pi = p[i]
        gi = g[i] + l2 * pi
        mi = beta1 * m[i] + one_minus_beta1 * gi
        vi = beta2 * v[i] + one_minus_beta2 * gi * gi
        m[i] = mi
        v[i] = vi
        p[i] = pi * shrink - step * mi / (math.sqrt(vi) * inv_root_bias2 + eps)


def adam_update_group(ps: list, gs: list, ms: list, vs: list, lr: float, beta1: float, beta2: float, eps: float,
                      weight_decay: float, decoupled: bool, ts: list[int]) -> None:
    """`adam_update` for every (p, g, m, v, t) of five lists, GROUP parameters a launch: the same arithmetic, each
    parameter with its own step t (one skipped in an earlier step has taken fewer)."""
    kept = [i for i in range(len(ps)) if ps[i].shape[0]]
    ps, gs, ms, vs, ts = ([seq[i] for i in kept] for seq in (ps, gs, ms, vs, ts))
    _same_dtype(ps, "adam_update_group")
    if not ps:
        return
    f = np.dtype(ps[0].dtype).type
    shrink = 1.0 - lr * weight_decay if decoupled else 1.0
    l2 = 0.0 if decoupled else weight_decay
    steps = [f(lr / (1.0 - beta1 ** t)) for t in ts]  # the bias corrections, folded per parameter on the host
    inv_roots = [f(1.0 / math.sqrt(1.0 - beta2 ** t)) for t in ts]
    for rows in _groups(len(ps)):
        adam_group_kernel[_group_grid(ps, rows)](
            _tuple(ps, rows), _tuple(gs, rows), _tuple(ms, rows), _tuple(vs, rows), _tuple(steps, rows),
            _tuple(inv_roots, rows), f(shrink), f(l2), f(beta1), f(1.0 - beta1), f(beta2), f(1.0 - beta2), f(eps))


@cuda.jit
def sum_of_squares_group_kernel(gs, partial, row0):
    """partial[row0 + j, block] = the sum of gs[j]^2 over the elements this block's threads visit (every block of the
    grid writes its entry, zero if it visits none), in float64 throughout."""
    part = cuda.shared.array(THREADS, dtype=np.float64)
    g = gs[cuda.blockIdx.y]
    s = np.float64(0.0)
    for i in range(cuda.threadIdx.x + cuda.blockIdx.x * cuda.blockDim.x, g.shape[0], cuda.blockDim.x * cuda.gridDim.x):
        x = np.float64(g[i])
        s += x * x
    s = block_sum(part, cuda.threadIdx.x, THREADS, s)
    if cuda.threadIdx.x == 0:
        partial[row0 + cuda.blockIdx.y, cuda.blockIdx.x] = s


def sum_of_squares_group(gs: list) -> float:
    """sum of g_i^2 over every element of every array of the list, as a Python float: GROUP arrays a launch, each
    block's partial sum written to one scratch array, which comes back in one copy (one wait for the GPU, not one an
    array)."""
    gs = [g for g in gs if g.shape[0]]
    _same_dtype(gs, "sum_of_squares_group")
    if not gs:
        return 0.0
    partial = cuda.device_array((len(gs), PARTIALS), dtype=np.float64)  # scratch: one number a block
    used = []
    for rows in _groups(len(gs)):
        grid, threads = _group_grid(gs, rows, cap=PARTIALS)
        sum_of_squares_group_kernel[grid, threads](_tuple(gs, rows), partial, rows.start)
        used.append((rows, grid[0]))
    host = partial.copy_to_host()
    return float(sum(np.sum(host[rows.start:rows.stop, :blocks], dtype=np.float64) for rows, blocks in used))


@cuda.jit
def scale_group_kernel(gs, coef):
    g = gs[cuda.blockIdx.y]
    for i in range(cuda.threadIdx.x + cuda.blockIdx.x * cuda.blockDim.x, g.shape[0], cuda.blockDim.x * cuda.gridDim.x):
        g[i] = g[i] * coef


def scale_group(gs: list, coef: float) -> None:
    """g *= coef in place for every array of the list (gradient clipping), GROUP a launch."""
    gs = [g for g in gs if g.shape[0]]
    _same_dtype(gs, "scale_group")
    for rows in _groups(len(gs)):
        scale_group_kernel[_group_grid(gs, rows)](_tuple(gs, rows), np.dtype(gs[0].dtype).type(coef))


# ---- one parameter: a group of one (the entries a learner's own step and clipping call on a GPU) ------------------

def sgd_update(p, g, buf, lr: float, momentum: float, weight_decay: float) -> None:
    """One step of SGD for one parameter: d = g + weight_decay p; with momentum buf = momentum buf + d, d = buf;
    p -= lr d. buf is empty when momentum is 0."""
    sgd_update_group([p], [g], [buf], lr, momentum, weight_decay)


def adam_update(p, g, m, v, lr: float, beta1: float, beta2: float, eps: float, weight_decay: float, decoupled: bool,
                t: int) -> None:
    """Step t of Adam (decoupled=False: L2 decay folded into the gradient) or AdamW (decoupled=True: p shrinks by
    lr * weight_decay first) for one parameter; p, m, v updated in place."""
    adam_update_group([p], [g], [m], [v], lr, beta1, beta2, eps, weight_decay, decoupled, [t])


def sum_of_squares(g) -> float:
    """sum g_i^2 over a 1-D device array, as a Python float (accumulated in float64)."""
    return sum_of_squares_group([g])


def scale(g, coef: float) -> None:
    """g *= coef in place (gradient clipping)."""
    scale_group([g], coef)


KERNELS = {"sgd_update": sgd_update, "adam_update": adam_update, "sum_of_squares": sum_of_squares, "scale": scale,
           "sgd_update_group": sgd_update_group, "adam_update_group": adam_update_group,
           "sum_of_squares_group": sum_of_squares_group, "scale_group": scale_group}
