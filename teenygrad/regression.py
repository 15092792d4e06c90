"""Chapter 1's model, fitted: a linear model $\\hat y = Xw$ on the normal equations and by gradient descent,
and the pieces exercise 1 asks for (a ridge penalty, weights back on the raw features, k-fold validation).

Plain numpy, as in chapter 1. `X` is an (n, d) float array whose column 0 is the bias column of ones (the
chapter's `add_bias`), `y` holds n targets and `w` d weights.

    fit_normal_equations(X, y)          the least-squares w, solving X^T X w = X^T y (chapter 1)
    gradient_descent(X, y, lr, steps)   w after `steps` steps down the (ridge) loss, and the losses on the way
    ridge_gradient(X, y, w, lam)        exercise 1: the gradient of the mean squared error plus a ridge penalty
    fit_ridge(X, y, lam)                exercise 1: the ridge weights in closed form
    unstandardize(w, mean, std)         exercise 1: weights fitted on standardized features, for the raw ones
    kfold_rmse(X, y, k, fit, seed)      exercise 1: the test RMSE of each of k folds
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from teenygrad.edition import exercise


def predict(X: np.ndarray, w: np.ndarray) -> np.ndarray:
    """The model's predictions $\\hat y = Xw$."""
    return X @ w


def fit_normal_equations(X: np.ndarray, y: np.ndarray) -> np.ndarray:
    """The least-squares weights: solve $X^\\top X w = X^\\top y$ (never form the inverse)."""
    return np.linalg.solve(X.T @ X, X.T @ y)


def ridge_loss(X: np.ndarray, y: np.ndarray, w: np.ndarray, lam: float = 0.0) -> float:
    """$\\frac1n \\lVert Xw - y \\rVert^2 + \\lambda \\sum_{j \\ge 1} w_j^2$ (the bias, w_0, is not penalised)."""
    return float(np.mean((X @ w - y) ** 2) + lam * np.sum(w[1:] ** 2))


@exercise("01-regression", "ridge_gradient")
def ridge_gradient(X: np.ndarray, y: np.ndarray, w: np.ndarray, lam: float) -> np.ndarray:
    """The gradient of `ridge_loss` with respect to w: $\\frac2n X^\\top (Xw - y) + 2\\lambda (0, w_1, \\dots)$.

    Returns a new (d,) array; w is not changed."""
    penalty = 2.0 * lam * w
    penalty[0] = 0.0  # the bias is not penalised
    return 2.0 / len(y) * X.T @ (X @ w - y) + penalty


@exercise("01-regression", "fit_ridge")
def fit_ridge(X: np.ndarray, y: np.ndarray, lam: float) -> np.ndarray:
    """The w minimising `ridge_loss`: setting its gradient to zero gives $(X^\\top X + n\\lambda D) w = X^\\top y$
    with $D$ the identity except $D_{00} = 0$. With $\\lambda > 0$ and a bias column of ones the system has one
    solution even when n < d."""
    n, d = X.shape
    penalty = np.eye(d) * (n * lam)
    penalty[0, 0] = 0.0
    return np.linalg.solve(X.T @ X + penalty, X.T @ y)


@exercise("01-regression", "unstandardize")
def unstandardize(w: np.ndarray, mean: np.ndarray, std: np.ndarray) -> np.ndarray:
    """Weights for the raw features from weights `w` = (bias, w_1..w_d) fitted on standardized ones.

    With $z_j = (x_j - \\mu_j)/\\sigma_j$, $w_0 + \\sum_j w_j z_j = (w_0 - \\sum_j w_j \\mu_j/\\sigma_j) + \\sum_j
    (w_j/\\sigma_j) x_j$: the same predictions, on the raw features."""
    scaled = w[1:] / std
    return np.concatenate([[w[0] - np.sum(scaled * mean)], scaled])


@exercise("01-regression", "kfold_rmse")
def kfold_rmse(X: np.ndarray, y: np.ndarray, k: int, fit: Callable[[np.ndarray, np.ndarray], np.ndarray],
               seed: int = 0) -> np.ndarray:
    """k-fold cross-validation: the test RMSE of each fold, a (k,) array.

    The rows are shuffled with `np.random.default_rng(seed).permutation(n)` and cut into k consecutive folds
    as `np.array_split` cuts (the first n mod k folds one row longer). Fold f is the test set of round f:
    `fit(X_rest, y_rest)` gives the weights, scored by the RMSE on fold f's rows."""
    n = len(y)
    if not 2 <= k <= n:
        raise ValueError(f"kfold_rmse: k must be between 2 and the number of rows ({n}), got {k}")
    folds = np.array_split(np.random.default_rng(seed).permutation(n), k)
    scores = []
    for f, test in enumerate(folds):
        train = np.concatenate([fold for g, fold in enumerate(folds) if g != f])
        w = fit(X[train], y[train])
        scores.append(np.sqrt(np.mean((X[test] @ w - y[test]) ** 2)))
    return np.array(scores)


def gradient_descent(X: np.ndarray, y: np.ndarray, lr: float, steps: int,
                     lam: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
    """`steps` steps $w \\leftarrow w - \\eta \\nabla L(w)$ from w = 0 (the ridge loss; lam = 0 is chapter 1's
    mean squared error). Returns the final w and the losses before every step and after the last."""
    w = np.zeros(X.shape[1])
    losses = [ridge_loss(X, y, w, lam)]
    for _ in range(steps):
        w = w - lr * ridge_gradient(X, y, w, lam)
        losses.append(ridge_loss(X, y, w, lam))
    return w, np.array(losses)
