"""Judge for assignment 06-tensor-autograd: the backward rules chapter 6 left out (exercises/06-tensor-autograd.ipynb).

The learner writes four rules of teenygrad: `max` with ties, `**` with a tensor exponent, the elementwise
`maximum`, and `cat`. The hidden tests install the learner's rule in the package (`teenygrad.edition.install`),
run teenygrad's backward on the grader's inputs and report the gradients of the inputs; this judge computes the
same gradients with numpy in float64.

Every case ends with a flag `noncontiguous` (and pow's with one more): when it is 1, the hidden tests build every
input, and the upstream gradient `w`, as non-contiguous teenygrad views of the same values.
  max_backward      (x, axes, keepdim, w, noncontiguous)   out = x.max(axes, keepdim)   -> dx
                    an empty `axes` array means axis=None (every axis); x has ties on purpose
  pow_backward      (a, b, w, noncontiguous, constant)     out = a ** b                 -> (da, db)
                    constant = 1: b is a Python number, out = a ** float(b)            -> (da,)
  maximum_backward  (a, b, w, noncontiguous)               out = a.maximum(b)          -> (da, db)
  cat_backward      (x0, x1, x2, axis, w, noncontiguous)   out = cat([x0, x1, x2], axis) -> (dx0, dx1, dx2)
"""
from __future__ import annotations

import numpy as np

from autograder.judges import Case, Part


def unbroadcast_np(g: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """Sum g (the gradient of a broadcast result) back to `shape`."""
    lead = g.ndim - len(shape)
    axes = tuple(range(lead)) + tuple(lead + d for d, n in enumerate(shape) if n == 1 and g.shape[lead + d] != 1)
    return g.sum(axis=axes, keepdims=True).reshape(shape)


# ---- max: the first maximum of each group gets the group's gradient ---------------------------------------------

_MAX_SHAPES = [  # (x, axes (empty: every axis), keepdim): ties everywhere (values drawn from a few integers)
    ((5,), (), 0), ((3, 4), (1,), 0), ((3, 4), (0,), 1), ((2, 3, 4), (0, 2), 0), ((2, 3, 4), (), 1),
    ((1, 1), (1,), 0), ((4, 1, 3), (1,), 1), ((2, 3, 4), (1,), 0), ((3, 2, 2, 3), (1, 3), 1), ((4, 6), (0, 1), 0),
]


def _max_out_shape(shape, axes, keepdim) -> tuple[int, ...]:
    red = set(axes) if len(axes) else set(range(len(shape)))
    return tuple(1 if d in red else n for d, n in enumerate(shape) if keepdim or d not in red)


def _max_cases(rng: np.random.Generator) -> list[Case]:
    cases = []
    for i, (shape, axes, keepdim) in enumerate(_MAX_SHAPES):
        levels = 2 if i % 3 else 1000  # mostly ties, sometimes (almost) none
        x = rng.integers(0, levels, size=shape).astype(np.float64) - levels / 2
        w = rng.normal(size=_max_out_shape(shape, axes, keepdim))
        cases.append((x, np.array(axes, dtype=np.int64), keepdim, w, i % 2))
    return cases


def _max(x, axes, keepdim, w, noncontiguous):
    axes = [int(a) for a in np.atleast_1d(axes)] or list(range(x.ndim))
    kept = [d for d in range(x.ndim) if d not in axes]
    groups = np.transpose(x, kept + axes).reshape(*(x.shape[d] for d in kept), -1)
    first = np.argmax(groups, axis=-1)  # numpy's argmax: the first maximum
    dx = np.zeros(groups.shape)
    np.put_along_axis(dx, first[..., None], np.asarray(w).reshape(first.shape)[..., None], axis=-1)
    dx = dx.reshape(*(x.shape[d] for d in kept), *(x.shape[d] for d in axes))
    return np.transpose(dx, np.argsort(kept + axes))


# ---- pow ---------------------------------------------------------------------------------------------------------

_POW_SHAPES = [((3, 4), (3, 4)), ((3, 4), (4,)), ((2, 1, 4), (3, 1)), ((5,), ()), ((1,), (2, 3)), ((4, 1), (1, 5))]


def _pow_cases(rng: np.random.Generator) -> list[Case]:
    cases = []
    for i, (sa, sb) in enumerate(_POW_SHAPES):
        a, b = rng.uniform(0.3, 2.5, size=sa), rng.uniform(-2.0, 3.0, size=sb)
        cases.append((a, b, rng.normal(size=np.broadcast_shapes(sa, sb)), i % 2, 0))
    for i, p in enumerate([2.0, 3.0, -1.0, 0.5]):  # a constant exponent: negative bases, where ln a is nan
        a = rng.normal(size=(3, 4)) if p.is_integer() else rng.uniform(0.1, 2.0, size=(3, 4))
        cases.append((a, np.float64(p), rng.normal(size=(3, 4)), i % 2, 1))
    return cases


def _pow(a, b, w, noncontiguous, constant):
    w = np.asarray(w)
    if constant:
        return (w * b * a ** (b - 1),)
    return unbroadcast_np(w * b * a ** (b - 1), np.shape(a)), unbroadcast_np(w * a ** b * np.log(a), np.shape(b))


# ---- maximum -------------------------------------------------------------------------------------------------------

_MAXIMUM_SHAPES = [((3, 4), (3, 4)), ((3, 4), (4,)), ((2, 1, 4), (3, 1)), ((5,), ()), ((1,), (2, 3)), ((4, 1), (1, 5))]


def _maximum_cases(rng: np.random.Generator) -> list[Case]:
    cases = []
    for i, (sa, sb) in enumerate(_MAXIMUM_SHAPES):  # a few integers: many ties
        a, b = rng.integers(-1, 2, size=sa).astype(np.float64), rng.integers(-1, 2, size=sb).astype(np.float64)
        cases.append((a, b, rng.normal(size=np.broadcast_shapes(sa, sb)), i % 2))
    return cases


def _maximum(a, b, w, noncontiguous):
    a_wins = (a >= b).astype(np.float64)  # broadcast; a tie goes to a
    w = np.asarray(w)
    return unbroadcast_np(w * a_wins, np.shape(a)), unbroadcast_np(w * (1 - a_wins), np.shape(b))


# ---- cat -----------------------------------------------------------------------------------------------------------

_CAT_SHAPES = [  # three inputs' shapes and the axis (negative: counted from the end)
    ([(2, 3), (4, 3), (1, 3)], 0), ([(2, 1, 4), (2, 3, 4), (2, 2, 4)], 1), ([(3,), (0,), (2,)], -1),
    ([(2, 3, 1), (2, 3, 2), (2, 3, 1)], 2), ([(1, 1), (1, 1), (1, 1)], 1), ([(2, 2, 3), (2, 2, 3), (2, 2, 3)], -3),
]


def _cat_cases(rng: np.random.Generator) -> list[Case]:
    cases = []
    for i, (shapes, axis) in enumerate(_CAT_SHAPES):
        xs = [rng.normal(size=s) for s in shapes]
        cases.append((*xs, axis, rng.normal(size=np.concatenate(xs, axis=axis).shape), i % 2))
    return cases


def _cat(x0, x1, x2, axis, w, noncontiguous):
    sizes = [x.shape[axis] for x in (x0, x1, x2)]
    return tuple(np.split(np.asarray(w), np.cumsum(sizes)[:-1], axis=axis))


PARTS = {
    "max_backward": Part(cases=_max_cases, reference=_max, rtol=1e-9, atol=1e-12),
    "pow_backward": Part(cases=_pow_cases, reference=_pow, rtol=1e-7, atol=1e-9),
    "maximum_backward": Part(cases=_maximum_cases, reference=_maximum, rtol=1e-9, atol=1e-12),
    "cat_backward": Part(cases=_cat_cases, reference=_cat, rtol=0.0, atol=0.0),
}
