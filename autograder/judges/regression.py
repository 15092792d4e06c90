"""Judge for assignment 01-regression: linear regression by hand (exercises/01-regression.ipynb).

Every part is a float64 computation compared with a numpy reference. Inputs are drawn with a few random
shapes, including the edge cases one row (n = 1) and one feature (d = 1).
"""
from __future__ import annotations

import numpy as np

from autograder.judges import Case, Part

# (n rows, d features): one row, one feature, both, and a few ordinary shapes
_SHAPES = [(1, 1), (1, 4), (7, 1), (5, 3), (20, 6), (64, 11)]


def _data(rng: np.random.Generator, n: int, d: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A design matrix, targets and weights of modest size (entries around 1)."""
    X = rng.normal(size=(n, d))
    y = rng.normal(size=n) * 2.0
    w = rng.normal(size=d)
    return X, y, w


def _predict_cases(rng: np.random.Generator) -> list[Case]:
    return [(X, w) for X, _, w in (_data(rng, n, d) for n, d in _SHAPES)]


def _loss_cases(rng: np.random.Generator) -> list[Case]:
    return [_data(rng, n, d) for n, d in _SHAPES]


def _step_cases(rng: np.random.Generator) -> list[Case]:
    lrs = [0.1, 0.01, 0.5, 1e-3, 0.05, 0.2]
    return [(*_data(rng, n, d), lr) for (n, d), lr in zip(_SHAPES, lrs)]


def _normal_cases(rng: np.random.Generator) -> list[Case]:
    """Well-conditioned least-squares problems, n >= d: random Gaussian X with a safety margin of rows."""
    cases = []
    for n, d in [(1, 1), (3, 1), (4, 4), (12, 4), (40, 8), (100, 12)]:
        while True:  # redraw until the singular values of X are away from 0 and from each other
            X = rng.normal(size=(n, d))
            s = np.linalg.svd(X, compute_uv=False)
            if s.min() > 0.2 and s.max() / s.min() < 100:
                break
        y = X @ rng.normal(size=d) + 0.1 * rng.normal(size=n)
        cases.append((X, y))
    return cases


def _predict(X: np.ndarray, w: np.ndarray) -> np.ndarray:
    return X @ w


def _mse_loss(X: np.ndarray, y: np.ndarray, w: np.ndarray) -> np.ndarray:
    return np.asarray(np.mean((X @ w - y) ** 2))


def _mse_gradient(X: np.ndarray, y: np.ndarray, w: np.ndarray) -> np.ndarray:
    return 2.0 / len(y) * X.T @ (X @ w - y)


def _gd_step(X: np.ndarray, y: np.ndarray, w: np.ndarray, lr: float) -> np.ndarray:
    return w - lr * _mse_gradient(X, y, w)


def _fit_normal_equations(X: np.ndarray, y: np.ndarray) -> np.ndarray:
    return np.linalg.lstsq(X, y, rcond=None)[0]  # the same w as solving X^T X w = X^T y, computed stably


PARTS = {
    "predict": Part(cases=_predict_cases, reference=_predict, rtol=1e-7, atol=1e-9),
    "mse_loss": Part(cases=_loss_cases, reference=_mse_loss, rtol=1e-7, atol=1e-9),
    "mse_gradient": Part(cases=_loss_cases, reference=_mse_gradient, rtol=1e-7, atol=1e-9),
    "gd_step": Part(cases=_step_cases, reference=_gd_step, rtol=1e-7, atol=1e-9),
    # solve, inv and lstsq all agree to about cond(X)^2 * 1e-16 <= 1e-10 on these well-conditioned cases
    "fit_normal_equations": Part(cases=_normal_cases, reference=_fit_normal_equations, rtol=1e-6, atol=1e-8),
}
