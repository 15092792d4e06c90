"""Chapter 1's piece of teenygrad: splitting a data set, standardizing its features, and undoing it.

Plain numpy (numpy is teenygrad's storage and I/O layer). Chapter 1 writes `train_test_split` step by step;
`standardize` (fit on the training rows, transform both sets) and `unstandardize` (carry weights fitted on
standardized data back to the raw data) are exercise 1's.
"""
from __future__ import annotations

import math

import numpy as np

from teenygrad.edition import exercise


def train_test_split(
    X: np.ndarray, y: np.ndarray, test_fraction: float = 0.2, seed: int = 0
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Shuffle the rows with a seeded permutation and cut off a test set.

    With $n$ rows and a permutation $\\pi$ drawn by `np.random.default_rng(seed)`, the test set is the rows
    $\\pi_0, \\dots, \\pi_{m-1}$ with $m = \\lceil f\\,n \\rceil$ ($f$ = `test_fraction`) and the training set is
    the other $n - m$ rows, in permuted order. Every row lands in exactly one of the two sets, and the same
    seed always gives the same split.

    Returns `(X_train, X_test, y_train, y_test)`.
    """
    X, y = np.asarray(X), np.asarray(y)
    if X.ndim < 1 or y.ndim < 1 or len(X) != len(y):
        raise ValueError(f"X and y must have the same number of rows, got {np.shape(X)} and {np.shape(y)}")
    if not 0.0 < test_fraction < 1.0:
        raise ValueError(f"test_fraction must be strictly between 0 and 1, got {test_fraction!r}")
    n = len(X)
    n_test = math.ceil(test_fraction * n)
    if n_test >= n:
        raise ValueError(f"test_fraction={test_fraction} of {n} rows leaves no rows to train on")
    perm = np.random.default_rng(seed).permutation(n)
    test, train = perm[:n_test], perm[n_test:]
    return X[train], X[test], y[train], y[test]


@exercise("01-regression", "standardize")
def standardize(
    X_train: np.ndarray, X_test: np.ndarray, eps: float = 1e-12
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Rescale every feature (column) to mean 0 and standard deviation 1 *on the training set*.

    With the training set's column means $\\mu_j$ and (population) standard deviations $\\sigma_j$,
    $$z_{ij} = (x_{ij} - \\mu_j) / \\sigma_j,$$
    applied with the same $\\mu, \\sigma$ to the test rows: the test set must not leak into the fit.
    A constant column ($\\sigma_j \\le$ `eps`) is divided by 1 instead, so on the training set it becomes zeros
    (up to the rounding of $\\mu_j$), not NaN.

    Returns `(Z_train, Z_test, mean, std)`, with `std` after that guard. Raises ValueError unless both are 2-D
    with the same columns and X_train has a row.
    """
    X_train = np.asarray(X_train, dtype=np.float64)
    X_test = np.asarray(X_test, dtype=np.float64)
    if X_train.ndim != 2 or X_test.ndim != 2 or X_train.shape[1] != X_test.shape[1]:
        raise ValueError(f"expected two 2-D arrays with the same columns, got {X_train.shape} and {X_test.shape}")
    if len(X_train) == 0:
        raise ValueError("X_train has no rows to take a mean and a standard deviation from")
    mean = X_train.mean(axis=0)
    std = X_train.std(axis=0)
    std = np.where(std > eps, std, 1.0)
    return (X_train - mean) / std, (X_test - mean) / std, mean, std


@exercise("01-regression", "standardize")
def unstandardize(w: np.ndarray, mean: np.ndarray, std: np.ndarray, y_mean: float = 0.0,
                  y_std: float = 1.0) -> np.ndarray:
    """The weights for the raw features `[1, x]` that predict what `w` = (w_0, w_1..w_d) predicts on `[1, z]`.

    With $z_j = (x_j - \\mu_j)/\\sigma_j$ (`mean`, `std`, as `standardize` returns them) and a target that was
    standardized too, $(y - $ `y_mean`$)/$ `y_std` (the defaults 0 and 1: a raw target), the raw model
    $v_0 + \\sum_j v_j x_j$ must equal $\\text{y\\_mean} + \\text{y\\_std}\\,(w_0 + \\sum_j w_j z_j)$ for every x.
    Returns a new (d + 1,) array. w is 1-D: a regularisation path goes back one row at a time. Raises ValueError
    when w does not have one weight per feature plus the bias,
    or when a std (or y_std) is not positive."""
    w, mean, std = (np.asarray(a, dtype=np.float64) for a in (w, mean, std))
    if w.ndim != 1 or mean.shape != (len(w) - 1,) or std.shape != mean.shape:
        raise ValueError(f"unstandardize: w must be (d + 1,) for d features, got {w.shape}, {mean.shape}, {std.shape}")
    if not (np.all(std > 0) and y_std > 0):
        raise ValueError("unstandardize: std and y_std must be positive (standardize replaces zeros by 1)")
    scaled = y_std * w[1:] / std
    return np.concatenate([[y_mean + y_std * w[0] - np.sum(scaled * mean)], scaled])
