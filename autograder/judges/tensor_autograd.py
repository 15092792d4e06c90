"""Judge for assignment 06-tensor-autograd: backward rules for teenygrad (exercises/06-tensor-autograd.ipynb).

The learner writes `unbroadcast` and three backward rules (add, matmul, sum). The hidden tests run teenygrad's
backward with the learner's rule swapped in (`teenygrad.autograd.use_rules`) and report the gradients of the
inputs; this judge computes the same gradients with numpy in float64.

Gradient cases. Every gradient case ends with a flag `noncontiguous`: when it is 1, the hidden tests build
every input, and the upstream gradient `w`, as non-contiguous teenygrad views of the same values.
  unbroadcast   (grad, shape, noncontiguous)        shape is an int array      -> unbroadcast(grad, shape)
  add           (a, b, w, noncontiguous)            out = a + b, out.backward(w)   -> (da, db)
  matmul        (a, b, w, noncontiguous)            out = a @ b, out.backward(w)   -> (da, db)
  sum           (x, axes, keepdim, w, noncontiguous) out = x.sum(axes, keepdim), out.backward(w) -> dx;
                                                     an empty `axes` array means axis=None (every axis)
Training cases (six arguments): (X, Y, W, b, lr, steps). Softmax regression, float64, `steps` steps of
gradient descent on the loss -sum(log_softmax(X @ W + b) * Y) / n, with the learner's rule in effect; the
report is the loss before each step and after the last (steps + 1 numbers).
"""
from __future__ import annotations

import numpy as np

from autograder.judges import Case, Part

TRAIN_ARGS = 6  # a case with this many arguments is a training run; fewer, a gradient case


def unbroadcast_np(g: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """Sum g (the gradient of a broadcast result) back to `shape`."""
    lead = g.ndim - len(shape)
    axes = tuple(range(lead)) + tuple(lead + d for d, n in enumerate(shape) if n == 1 and g.shape[lead + d] != 1)
    return g.sum(axis=axes, keepdims=True).reshape(shape)


def _train_np(X, Y, W, b, lr, steps) -> np.ndarray:
    """Softmax regression by gradient descent with the hand-derived gradient (the reference trajectory)."""
    n = len(X)
    W, b, losses = W.copy(), b.copy(), []
    for step in range(int(steps) + 1):
        z = X @ W + b
        z = z - z.max(axis=1, keepdims=True)
        log_p = z - np.log(np.exp(z).sum(axis=1, keepdims=True))
        losses.append(-(log_p * Y).sum() / n)
        if step == steps:
            break
        dz = (np.exp(log_p) * Y.sum(axis=1, keepdims=True) - Y) / n  # rows of Y sum to 1: softmax - onehot
        W, b = W - lr * X.T @ dz, b - lr * dz.sum(axis=0)
    return np.array(losses)


def _training_case(rng: np.random.Generator) -> Case:
    n, d, c = 24, 5, 3
    X = rng.normal(size=(n, d))
    Y = np.eye(c)[rng.integers(0, c, size=n)]
    return X, Y, 0.5 * rng.normal(size=(d, c)), 0.5 * rng.normal(size=c), 0.5, 10


def _with_training(reference):
    def ref(*case):
        return _train_np(*case) if len(case) == TRAIN_ARGS else reference(*case)
    return ref


# ---- unbroadcast -------------------------------------------------------------------------------------------

_UNBROADCAST_SHAPES = [  # (shape of the gradient, shape to sum it back to)
    ((4, 2, 3), (2, 1)), ((3,), (3,)), ((2, 3), ()), ((5, 4), (4,)), ((5, 4), (1, 4)), ((5, 4), (5, 1)),
    ((1, 4), (1, 4)), ((3, 1, 4, 2), (1, 1, 2)), ((2, 3, 4), (3, 1)), ((6, 5), (1, 1)),
]


def _unbroadcast_cases(rng: np.random.Generator) -> list[Case]:
    cases = [(rng.normal(size=g), np.array(s, dtype=np.int64), i % 2) for i, (g, s) in enumerate(_UNBROADCAST_SHAPES)]
    return cases + [_training_case(rng)]


def _unbroadcast(grad, shape, noncontiguous) -> np.ndarray:
    return unbroadcast_np(grad, tuple(int(n) for n in np.atleast_1d(shape)) if np.size(shape) else ())


# ---- add -------------------------------------------------------------------------------------------------------

_ADD_SHAPES = [  # (a, b): both sides broadcast, leading dims, size-1 dims, a 0-d operand, no broadcasting
    ((3, 4), (3, 4)), ((3, 4), (4,)), ((2, 1, 4), (3, 1)), ((5,), ()), ((1,), (2, 3)), ((2, 3, 1), (2, 1, 4)),
    ((1, 1), (1, 1)), ((4, 1), (1, 5)),
]


def _add_cases(rng: np.random.Generator) -> list[Case]:
    cases = []
    for i, (sa, sb) in enumerate(_ADD_SHAPES):
        out = np.broadcast_shapes(sa, sb)
        cases.append((rng.normal(size=sa), rng.normal(size=sb), rng.normal(size=out), (i + 1) % 2))
    return cases + [_training_case(rng)]


def _add(a, b, w, noncontiguous):
    w = np.asarray(w)
    return unbroadcast_np(w, np.shape(a)), unbroadcast_np(w, np.shape(b))


# ---- matmul ------------------------------------------------------------------------------------------------------

_MATMUL_SHAPES = [  # plain, 1x1, K = 1, batched, a batch against a shared matrix (either side), 4-D
    ((3, 4), (4, 2)), ((1, 1), (1, 1)), ((5, 1), (1, 3)), ((2, 3, 4), (2, 4, 5)), ((3, 2, 4), (4, 6)),
    ((4, 3), (2, 3, 5)), ((2, 2, 3, 4), (2, 2, 4, 3)), ((1, 6), (6, 1)),
]


def _matmul_cases(rng: np.random.Generator) -> list[Case]:
    cases = []
    for i, (sa, sb) in enumerate(_MATMUL_SHAPES):
        a, b = rng.normal(size=sa), rng.normal(size=sb)
        cases.append((a, b, rng.normal(size=np.matmul(a, b).shape), i % 2))
    return cases + [_training_case(rng)]


def _matmul(a, b, w, noncontiguous):
    da = unbroadcast_np(w @ np.swapaxes(b, -1, -2), a.shape)
    db = unbroadcast_np(np.swapaxes(a, -1, -2) @ w, b.shape)
    return da, db


# ---- sum -------------------------------------------------------------------------------------------------------

_SUM_SHAPES = [  # (x, axes (empty: every axis), keepdim)
    ((5,), (), 0), ((3, 4), (0,), 0), ((3, 4), (-1,), 1), ((2, 3, 4), (0, 2), 0), ((2, 3, 4), (), 1),
    ((1, 1), (1,), 0), ((4, 1, 3), (1,), 1), ((2, 3, 4), (-2,), 0), ((3, 2), (0, 1), 1),
]


def _sum_out_shape(shape, axes, keepdim) -> tuple[int, ...]:
    red = {a % len(shape) for a in axes} if len(axes) else set(range(len(shape)))
    return tuple(1 if d in red else n for d, n in enumerate(shape) if keepdim or d not in red)


def _sum_cases(rng: np.random.Generator) -> list[Case]:
    cases = []
    for i, (shape, axes, keepdim) in enumerate(_SUM_SHAPES):
        w = rng.normal(size=_sum_out_shape(shape, axes, keepdim))
        cases.append((rng.normal(size=shape), np.array(axes, dtype=np.int64), keepdim, w, i % 2))
    return cases + [_training_case(rng)]


def _sum(x, axes, keepdim, w, noncontiguous):
    axes = np.atleast_1d(axes)
    red = {int(a) % x.ndim for a in axes} if axes.size else set(range(x.ndim))
    w = np.asarray(w).reshape(tuple(1 if d in red else n for d, n in enumerate(x.shape)))
    return np.broadcast_to(w, x.shape).copy()


PARTS = {
    "unbroadcast": Part(cases=_unbroadcast_cases, reference=_with_training(_unbroadcast), rtol=1e-7, atol=1e-9),
    "add_backward": Part(cases=_add_cases, reference=_with_training(_add), rtol=1e-7, atol=1e-9),
    "matmul_backward": Part(cases=_matmul_cases, reference=_with_training(_matmul), rtol=1e-7, atol=1e-9),
    "sum_backward": Part(cases=_sum_cases, reference=_with_training(_sum), rtol=1e-7, atol=1e-9),
}
