"""Judge for assignment 01-regression: ridge regression and an honest score (exercises/01-regression.ipynb).

Every part is a piece of `teenygrad.regression`; the hidden tests install the learner's function and run it
*through teenygrad* (`ridge_gradient` also inside `teenygrad.regression.gradient_descent`). Every part is a
float64 computation compared with a numpy reference written here from the definitions. Inputs: random design
matrices with the bias column of ones first, including one row, one feature (the bias alone) and, for the
ridge fit, more features than rows.
"""
from __future__ import annotations

import numpy as np

from autograder.judges import Case, Part

# (n rows, d columns including the bias)
_SHAPES = [(1, 1), (1, 4), (7, 1), (5, 3), (20, 6), (64, 11)]


def _design(rng: np.random.Generator, n: int, d: int) -> np.ndarray:
    return np.column_stack([np.ones(n), rng.normal(size=(n, d - 1))])


def _penalty(d: int, lam: float) -> np.ndarray:
    """2 * lam * D with D = identity without its (0, 0) entry: the bias is not penalised."""
    D = np.eye(d)
    D[0, 0] = 0.0
    return lam * D


# ---- ridge_gradient: a direct call and 25 steps of teenygrad's gradient descent ----------------------------

def _gradient(X: np.ndarray, y: np.ndarray, w: np.ndarray, lam: float) -> np.ndarray:
    return 2.0 / len(y) * X.T @ (X @ w - y) + 2.0 * _penalty(len(w), lam) @ w


def _gradient_cases(rng: np.random.Generator) -> list[Case]:
    lams = [0.0, 0.7, 0.3, 0.0, 1.5, 0.05]
    cases = []
    for (n, d), lam in zip(_SHAPES, lams):
        X = _design(rng, n, d)
        lr = 0.9 / (np.linalg.eigvalsh(2.0 / n * X.T @ X + 2.0 * _penalty(d, lam)).max())  # a stable step
        cases.append((X, rng.normal(size=n) * 2.0, rng.normal(size=d), lam, lr))
    return cases


def _gradient_and_descent(X, y, w, lam, lr) -> tuple[np.ndarray, np.ndarray]:
    v = np.zeros(X.shape[1])
    for _ in range(25):
        v = v - lr * _gradient(X, y, v, lam)
    return _gradient(X, y, w, lam), v


# ---- fit_ridge ----------------------------------------------------------------------------------------------

def _ridge_cases(rng: np.random.Generator) -> list[Case]:
    """lam = 0 only on well-conditioned problems with n >= d; lam > 0 also with n < d."""
    cases = []
    for n, d, lam in [(1, 1, 0.5), (3, 1, 0.0), (12, 4, 0.0), (40, 8, 0.0), (12, 4, 0.8), (2, 5, 0.3),
                      (1, 3, 2.0), (100, 12, 0.05)]:
        while True:
            X = _design(rng, n, d)
            s = np.linalg.svd(X, compute_uv=False)
            if lam > 0 or (s.min() > 0.2 and s.max() / s.min() < 100):
                break
        cases.append((X, X @ rng.normal(size=d) + 0.3 * rng.normal(size=n), lam))
    return cases


def _fit_ridge(X: np.ndarray, y: np.ndarray, lam: float) -> np.ndarray:
    n, d = X.shape
    if lam == 0:
        return np.linalg.lstsq(X, y, rcond=None)[0]
    # the ridge solution as an ordinary least-squares problem: rows sqrt(n lam) D appended to X (and 0s to y)
    A = np.vstack([X, np.sqrt(n * lam) * _penalty(d, 1.0)])
    return np.linalg.lstsq(A, np.concatenate([y, np.zeros(d)]), rcond=None)[0]


# ---- unstandardize ------------------------------------------------------------------------------------------

def _unstandardize_cases(rng: np.random.Generator) -> list[Case]:
    cases = []
    for d in (1, 2, 5, 11):
        mean = rng.uniform(-100, 100, size=d)
        std = rng.uniform(0.05, 50, size=d)
        if d > 2:
            std[1] = 1.0  # a constant column, after standardize's guard
        cases.append((rng.normal(size=d + 1) * 10, mean, std))
    return cases


def _unstandardize(w: np.ndarray, mean: np.ndarray, std: np.ndarray) -> np.ndarray:
    """Solve for v from the predictions themselves: [1, x] v = [1, (x - mean) / std] w at d + 1 points x."""
    d = len(mean)
    points = mean + std * np.vstack([np.zeros(d), np.eye(d)])  # x = mean, then mean + std e_j
    A = np.column_stack([np.ones(d + 1), points])
    return np.linalg.solve(A, np.column_stack([np.ones(d + 1), (points - mean) / std]) @ w)


# ---- kfold_rmse, with least squares as the fit ---------------------------------------------------------------

def _kfold_cases(rng: np.random.Generator) -> list[Case]:
    cases = []
    for n, d, k in [(4, 1, 2), (9, 2, 3), (10, 3, 4), (6, 2, 6), (31, 4, 5), (50, 6, 7)]:
        X = _design(rng, n, d)
        cases.append((X, X @ rng.normal(size=d) + rng.normal(size=n), k, int(rng.integers(0, 1000))))
    return cases


def _kfold(X: np.ndarray, y: np.ndarray, k: int, seed: int) -> np.ndarray:
    n = len(y)
    perm = np.random.default_rng(int(seed)).permutation(n)
    sizes = [n // k + (1 if f < n % k else 0) for f in range(k)]
    starts = np.cumsum([0] + sizes)
    scores = []
    for f in range(k):
        test = perm[starts[f]:starts[f + 1]]
        train = np.concatenate([perm[:starts[f]], perm[starts[f + 1]:]])
        w = np.linalg.lstsq(X[train], y[train], rcond=None)[0]
        scores.append(np.sqrt(np.mean((X[test] @ w - y[test]) ** 2)))
    return np.array(scores)


PARTS = {
    "ridge_gradient": Part(cases=_gradient_cases, reference=_gradient_and_descent, rtol=1e-7, atol=1e-9),
    # solve, lstsq and the augmented least squares agree to about cond^2 * 1e-16 on these cases
    "fit_ridge": Part(cases=_ridge_cases, reference=_fit_ridge, rtol=1e-6, atol=1e-8),
    "unstandardize": Part(cases=_unstandardize_cases, reference=_unstandardize, rtol=1e-8, atol=1e-8),
    "kfold_rmse": Part(cases=_kfold_cases, reference=_kfold, rtol=1e-6, atol=1e-8),
}
