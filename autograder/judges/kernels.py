"""Judge for assignment 03-kernels: numba kernels (exercises/03-kernels.ipynb).

The learner writes kernels that follow teenygrad's calling conventions (see `teenygrad.kernels`), and the
hidden tests run *teenygrad itself* on top of them: `with teenygrad.kernels.use(relu=relu_kernel): ...`.
So a kernel scores only if it honours the convention exactly, strides, offsets and all, on the views the
hidden cell builds from each case (a step slice, a transpose, a flip, a broadcast, an empty axis). The
references below are numpy on exactly the same views; `VIEWS` spells them out once for both sides (the
hidden cells of solutions/03-kernels.ipynb build the same list, and tests/test_chapter3.py checks that they
agree).

The speed part, `blocked_is_faster`, is different in kind: a timing measured in the learner's process
could be faked (patch `time.perf_counter` and any kernel looks fast). So its hidden test reports only the
product, and the grader times the kernel itself (`autograder/speed.py`): it runs the notebook's setup cell
and the part's solution cell in a sandboxed harness of their own, times calls on fresh inputs with its own
clock, and compares with teenygrad's naive kernel served and timed the same way.
"""
from __future__ import annotations

import numpy as np

from autograder.judges import Case, Part
from autograder.speed import Speed

# ---- the views the hidden tests take; each name is what the hidden cell calls on a teenygrad Tensor t --------

RELU_VIEWS = {  # name -> numpy view of x (x has ndim >= 2)
    "t": lambda x: x,
    "t[::2].T": lambda x: x[::2].T,
    "t[:, ::-1]": lambda x: x[:, ::-1],
    "t[1:, 1:]": lambda x: x[1:, 1:],
    "t.unsqueeze(0).expand(2, ...)": lambda x: np.broadcast_to(x[None], (2, *x.shape)),
}

SUM_VIEWS = {  # name -> (numpy view of x, axis)
    "t.sum()": (lambda x: x, None),
    "t.sum(axis=0)": (lambda x: x, 0),
    "t.sum(axis=-1)": (lambda x: x, -1),
    "t.T.sum(axis=-1)": (lambda x: x.T, -1),
    "t[::2, ::-1].sum(axis=1)": (lambda x: x[::2, ::-1], 1),
}


def _relu(x: np.ndarray) -> tuple:
    return tuple(np.where(v > 0, v, 0).astype(x.dtype) for v in (view(x) for view in RELU_VIEWS.values()))


def _sum(x: np.ndarray) -> tuple:
    return tuple(np.sum(view(x).astype(np.float64), axis=axis).astype(x.dtype) for view, axis in SUM_VIEWS.values())


def _matmul(a: np.ndarray, b: np.ndarray) -> tuple:
    """(direct call on a[0] @ b, Tensor a[0] @ b, Tensor b.T @ a[0].T, Tensor a @ b with a batch)."""
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    first = a64[0] @ b64
    return tuple(c.astype(a.dtype) for c in (first, first, b64.T @ a64[0].T, a64 @ b64))


# ---- inputs --------------------------------------------------------------------------------------------

def _relu_cases(rng: np.random.Generator) -> list[Case]:
    shapes = [(1, 1), (2, 1), (1, 9), (7, 5), (4, 3, 6), (33, 17), (2, 3, 4, 5)]
    cases = [(rng.normal(size=s).astype(np.float32),) for s in shapes]
    cases.append((rng.normal(size=(6, 11)),))  # float64: the kernel must not assume a dtype
    return cases


def _sum_cases(rng: np.random.Generator) -> list[Case]:
    shapes = [(1, 1), (1, 7), (6, 1), (5, 8), (31, 23), (4, 0), (3, 4, 5), (2, 3, 2, 4)]
    cases = [(rng.normal(size=s).astype(np.float32),) for s in shapes]
    cases.append((rng.normal(size=(9, 13)),))  # float64
    return cases


# (batch, M, K, N): ones, zeros (K = 0 must write zeros; M or N = 0 must not crash), primes and sizes past
# any sensible block size, so that every partial block at the edges is exercised
_MATMUL_SHAPES = [(1, 1, 1, 1), (1, 1, 7, 1), (2, 3, 0, 5), (1, 0, 3, 4), (1, 4, 5, 0), (3, 5, 2, 7),
                  (1, 13, 17, 11), (2, 37, 41, 29), (1, 67, 131, 71)]


def _matmul_cases(rng: np.random.Generator) -> list[Case]:
    return [(rng.normal(size=(batch, m, k)).astype(np.float32), rng.normal(size=(k, n)).astype(np.float32))
            for batch, m, k, n in _MATMUL_SHAPES]


SPEED_SIZE = 192
SPEEDUP = 2.0  # the learner's kernel must be at least this many times faster than teenygrad's naive one


def _speed_cases(rng: np.random.Generator) -> list[Case]:
    n = SPEED_SIZE
    return [(rng.normal(size=(n, n)).astype(np.float32), rng.normal(size=(n, n)).astype(np.float32))]


def _speed_check(case: Case, outputs: tuple) -> str | None:
    """outputs = (the product fast_blocked_matmul computed on the grader's matrices,)."""
    a, b = case
    if len(outputs) != 1:
        return f"reported {len(outputs)} values, expected the product"
    want = a.astype(np.float64) @ b.astype(np.float64)
    if outputs[0].shape != want.shape or not np.allclose(outputs[0], want, rtol=1e-4, atol=1e-3):
        return "fast_blocked_matmul did not compute a @ b (a fast wrong answer does not count)"
    return None


def _speed_arguments(rng: np.random.Generator) -> tuple:
    """One timed call: fresh a and b, and an output full of NaN (every element must be written)."""
    a, b = _speed_cases(rng)[0]
    return a, b, np.full((SPEED_SIZE, SPEED_SIZE), np.nan, dtype=np.float32)


SPEED = Speed(function="fast_blocked_matmul", reference="teenygrad.kernels.matmul:matmul_naive",
              arguments=_speed_arguments, expected=lambda a, b: a.astype(np.float64) @ b.astype(np.float64),
              speedup=SPEEDUP)


PARTS = {
    # float32 results are compared with float64 references rounded to float32: tolerances cover float32
    # rounding (a relu is exact; sums and products of up to ~1000 terms of size ~1 round by ~1e-5)
    "relu_kernel": Part(cases=_relu_cases, reference=_relu, rtol=1e-6, atol=1e-7),
    "sum_kernel": Part(cases=_sum_cases, reference=_sum, rtol=1e-4, atol=1e-4),
    "blocked_matmul": Part(cases=_matmul_cases, reference=_matmul, rtol=1e-4, atol=1e-4),
    "blocked_is_faster": Part(cases=_speed_cases, check=_speed_check, speed=SPEED),
}
