"""Judge for assignment 01-regression: the fitting pipeline of `teenygrad.regression` and
`teenygrad.preprocessing` (exercises/01-regression.ipynb).

Every part is a piece of teenygrad; the hidden tests install the learner's functions and call them *through
teenygrad*. A part whose piece takes another piece as an argument gets a stand-in written in the hidden test
(`gradient_descent` minimises the grader's own losses; `cross_validation` fits with the grader's own ridge), so
each part scores alone. Every reference here is float64 numpy written from the definitions, never teenygrad's
piece. Inputs: random design matrices with the bias column of ones first, including one row, one feature (the
bias alone), more features than rows; and the error cases the contracts name (answered by the hidden tests as
the one-number array [-1]).
"""
from __future__ import annotations

import numpy as np

from autograder.judges import Case, Part

RAISED = (np.array([-1.0]),)  # what a hidden test reports when the piece raised ValueError
# (n rows, d columns including the bias)
_SHAPES = [(1, 1), (1, 4), (7, 1), (5, 3), (20, 6), (64, 11)]


def _design(rng: np.random.Generator, n: int, d: int) -> np.ndarray:
    return np.column_stack([np.ones(n), rng.normal(size=(n, d - 1))])


def _no_bias(d: int) -> np.ndarray:
    """The identity without its (0, 0) entry: the bias is not penalised."""
    D = np.eye(d)
    D[0, 0] = 0.0
    return D


# ---- ridge_gradient: a direct call; w must come back unchanged ----------------------------------------------

def _gradient_cases(rng: np.random.Generator) -> list[Case]:
    lams = [0.0, 0.7, 0.3, 0.0, 1.5, 0.05]
    return [(_design(rng, n, d), rng.normal(size=n) * 2.0, rng.normal(size=d), lam)
            for (n, d), lam in zip(_SHAPES, lams)]


def _gradient(X, y, w, lam) -> tuple[np.ndarray, np.ndarray]:
    return 2.0 / len(y) * X.T @ (X @ w - y) + 2.0 * lam * _no_bias(len(w)) @ w, w


# ---- closed_form: solve_spd alone (mode 2), and the fit for one lam (mode 0) or a path (mode 1) ---------------

def _ridge_cases(rng: np.random.Generator) -> list[Case]:
    """lam = 0 only on well-conditioned problems with n >= d, or exactly singular ones (an error); lam > 0 also
    with n < d."""
    cases = []
    for n, d, lam in [(1, 1, 0.5), (3, 1, 0.0), (12, 4, 0.0), (40, 8, 0.0), (12, 4, 0.8), (2, 5, 0.3),
                      (1, 3, 2.0), (100, 12, 0.05)]:
        while True:
            X = _design(rng, n, d)
            s = np.linalg.svd(X, compute_uv=False)
            if lam > 0 or (s.min() > 0.2 and s.max() / s.min() < 100):
                break
        cases.append((X, X @ rng.normal(size=d) + 0.3 * rng.normal(size=n), lam, 0))
    X = _design(rng, 30, 5)
    cases.append((X, rng.normal(size=30), np.array([0.0, 0.01, 0.5, 3.0]), 1))  # a path, from least squares
    cases.append((_design(rng, 3, 6), rng.normal(size=3), np.array([2.0, 0.2]), 1))  # a path with n < d
    X = _design(rng, 10, 3)
    cases.append((np.column_stack([X, X[:, 1]]), rng.normal(size=10), 0.0, 0))  # a repeated column: singular
    cases.append((_design(rng, 2, 5), rng.normal(size=2), 0.0, 0))  # n < d without a penalty: singular
    cases.append((X, rng.normal(size=10), -0.1, 0))  # a negative penalty
    for d in (1, 2, 7, 15):  # solve_spd on its own: symmetric positive definite systems
        B = rng.normal(size=(d, d))
        cases.append((B @ B.T + 0.5 * np.eye(d), rng.normal(size=d), 0.0, 2))
    B = rng.normal(size=(4, 2))
    cases.append((B @ B.T, rng.normal(size=4), 0.0, 2))  # rank 2 of 4: singular
    return cases


def _fit_ridge(A, b, lam, mode) -> tuple[np.ndarray, ...]:
    if mode == 2:
        return (np.linalg.lstsq(A, b, rcond=None)[0],) if np.linalg.matrix_rank(A) == len(A) else RAISED
    n, d = A.shape
    lams = np.atleast_1d(np.asarray(lam, dtype=np.float64))
    if np.any(lams < 0) or (np.any(lams == 0) and np.linalg.matrix_rank(A) < d):
        return RAISED
    # each fit as an ordinary least-squares problem: rows sqrt(n lam) D appended to X (and 0s to y)
    fits = [np.linalg.lstsq(np.vstack([A, np.sqrt(n * lam_i) * _no_bias(d)]), np.concatenate([b, np.zeros(d)]),
                            rcond=None)[0] for lam_i in lams]
    return (np.array(fits) if mode == 1 else fits[0],)


# ---- gradient_descent: on the grader's losses (kind 0 a quadratic, kind 1 the logistic loss) ----------------

def _descent_cases(rng: np.random.Generator) -> list[Case]:
    cases = []
    for d, lr_scale, max_steps, tol in [(3, 1.0, 1000, 1e-4), (1, 0.5, 1000, 1e-6), (6, 1.0, 25, 0.0),
                                        (4, 1.9, 500, 1e-3), (5, 2.5, 200, 1e-6), (3, 1.0, 0, 1e-3)]:
        U = np.linalg.qr(rng.normal(size=(d, d)))[0]
        Q = U @ np.diag(rng.uniform(0.5, 5.0, size=d)) @ U.T  # eigenvalues 0.5 to 5: a stretched bowl
        lr = lr_scale / np.linalg.eigvalsh(Q).max()  # 2.5 / lambda_max diverges
        cases.append((Q, rng.normal(size=d), rng.normal(size=d) * 3, lr, max_steps, tol, 0))
    cases.append((np.eye(2) * 2.0, np.zeros(2), np.zeros(2), 0.1, 50, 0.0, 0))  # starts at the minimum: no step
    cases.append((np.eye(2), np.ones(2), np.zeros(2), -0.1, 10, 1e-3, 0))  # lr <= 0
    for n, d in [(40, 3), (15, 5)]:
        A = _design(rng, n, d)
        labels = np.where(A @ rng.normal(size=d) + rng.normal(size=n) > 0, 1.0, -1.0)
        cases.append((A, labels, np.zeros(d), 1.0, 400, 1e-3, 1))
    return cases


def grader_loss(Q: np.ndarray, c: np.ndarray, kind: int):
    """(loss, grad) of the case: kind 0, 1/2 w^T Q w - c^T w; kind 1, the mean logistic loss of scores Q w and
    labels c = +-1. The hidden test builds the same two functions."""
    if kind == 0:
        return lambda w: 0.5 * w @ Q @ w - c @ w, lambda w: Q @ w - c
    return (lambda w: np.mean(np.logaddexp(0.0, -c * (Q @ w))),
            lambda w: -Q.T @ (c / (1.0 + np.exp(c * (Q @ w)))) / len(c))


def _descent(Q, c, w0, lr, max_steps, tol, kind) -> tuple[np.ndarray, ...]:
    if lr <= 0:
        return RAISED
    loss, grad = grader_loss(Q, c, kind)
    w, losses, g0 = w0.copy(), [loss(w0)], np.linalg.norm(grad(w0))
    for _ in range(int(max_steps)):
        g = grad(w)
        if np.linalg.norm(g) <= tol * g0:
            break
        w = w - lr * g
        losses.append(loss(w))
        if not np.isfinite(losses[-1]) or losses[-1] > losses[0]:
            return RAISED
    return w, np.array(losses), w0


# ---- standardize: standardize(X_train, X_test) and unstandardize(w, mean, std, y_mean, y_std) -------------

def _standardize_cases(rng: np.random.Generator) -> list[Case]:
    cases = []
    for n, m, d, y_scaled in [(20, 5, 3, False), (1, 2, 2, True), (50, 10, 1, True), (8, 3, 11, True)]:
        X_train = rng.normal(loc=rng.uniform(-100, 100, d), scale=rng.uniform(0.05, 50, d), size=(n, d))
        if d > 2:
            X_train[:, 1] = 7.0  # a constant column: its std becomes 1
        X_test = rng.normal(size=(m, d)) * 10
        mean, std = rng.uniform(-100, 100, size=d), rng.uniform(0.05, 50, size=d)
        y_mean, y_std = (rng.uniform(-1e5, 1e5), rng.uniform(1, 1e4)) if y_scaled else (0.0, 1.0)
        cases.append((X_train, X_test, rng.normal(size=d + 1) * 10, mean, std, y_mean, y_std))
    X = rng.normal(size=(6, 3))
    cases.append((X, rng.normal(size=(2, 4)), np.zeros(4), np.zeros(3), np.ones(3), 0.0, 1.0))  # columns differ
    return cases


def _standardize(X_train, X_test, w, mean, std, y_mean, y_std) -> tuple[np.ndarray, ...]:
    if X_train.shape[1] != X_test.shape[1]:
        return RAISED
    mu = X_train.sum(axis=0) / len(X_train)
    sigma = np.sqrt(((X_train - mu) ** 2).sum(axis=0) / len(X_train))
    sigma = np.where(sigma > 1e-12, sigma, 1.0)
    # v from the predictions themselves: [1, x] v = y_mean + y_std [1, (x - mean) / std] w at d + 1 points x
    d = len(mean)
    points = mean + std * np.vstack([np.zeros(d), np.eye(d)])  # x = mean, then mean + std e_j
    A = np.column_stack([np.ones(d + 1), points])
    v = np.linalg.solve(A, y_mean + y_std * np.column_stack([np.ones(d + 1), (points - mean) / std]) @ w)
    return (X_train - mu) / sigma, (X_test - mu) / sigma, mu, sigma, v


# ---- cross_validation: kfold_rmse and choose_lambda, fitting with the grader's ridge -------------------------

def grader_fit(A: np.ndarray, b: np.ndarray, lam: float) -> np.ndarray:
    """The hidden test's fit: ridge that penalises every weight by lam (another convention than fit_ridge's, on
    purpose: the folds must call `fit` with each lam as it is)."""
    d = A.shape[1]
    return np.linalg.lstsq(np.vstack([A, np.sqrt(lam) * np.eye(d)]), np.concatenate([b, np.zeros(d)]), rcond=None)[0]


def _cv_cases(rng: np.random.Generator) -> list[Case]:
    cases = []
    for n, d, k, lams in [(4, 1, 2, [0.0, 1.0]), (9, 2, 3, [0.1, 0.0, 3.0]), (10, 3, 4, [0.0, 0.5]),
                          (6, 2, 6, [0.01, 0.1]), (31, 4, 5, [0.0, 0.3, 1.0, 3.0, 10.0, 30.0]),
                          (50, 6, 7, [5.0, 0.0, 50.0, 0.5, 1.0]), (40, 8, 10, list(np.geomspace(1e-3, 100, 9)))]:
        X = _design(rng, n, d)
        w = rng.normal(size=d) * rng.uniform(0, 1, size=d)
        cases.append((X, X @ w + rng.normal(size=n) * 2, np.array(lams), k, int(rng.integers(0, 1000))))
    X = _design(rng, 5, 2)
    cases.append((X, rng.normal(size=5), np.array([0.1]), 6, 3))  # k > n
    cases.append((X, rng.normal(size=5), np.array([0.1]), 1, 3))  # k < 2
    cases.append((X, rng.normal(size=5), np.array([-1.0, 0.1]), 2, 3))  # a negative lam
    return cases


def _kfold(X, y, k, fit, seed) -> np.ndarray:
    n = len(y)
    perm = np.random.default_rng(int(seed)).permutation(n)
    sizes = [n // k + (1 if f < n % k else 0) for f in range(k)]
    starts = np.cumsum([0] + sizes)
    scores = []
    for f in range(k):
        test = perm[starts[f]:starts[f + 1]]
        train = np.concatenate([perm[:starts[f]], perm[starts[f + 1]:]])
        w = fit(X[train], y[train])
        scores.append(np.sqrt(np.mean((X[test] @ w - y[test]) ** 2)))
    return np.array(scores)


def _cross_validation(X, y, lams, k, seed) -> tuple[np.ndarray, ...]:
    if not 2 <= k <= len(y) or np.any(lams < 0):
        return RAISED
    scores = np.array([_kfold(X, y, k, lambda A, b, lam=lam: grader_fit(A, b, lam), seed) for lam in lams])
    means, errors = scores.mean(axis=1), scores.std(axis=1, ddof=1) / np.sqrt(k)
    best = np.argmin(means)
    chosen = max(lam for lam, m in zip(lams, means) if m <= means[best] + errors[best])
    return scores[0], np.float64(chosen), scores


PARTS = {
    "ridge_gradient": Part(cases=_gradient_cases, reference=_gradient, rtol=1e-7, atol=1e-9),
    # Cholesky, lstsq and the augmented least squares agree to about cond^2 * 1e-16 on these cases
    "closed_form": Part(cases=_ridge_cases, reference=_fit_ridge, rtol=1e-6, atol=1e-8),
    "gradient_descent": Part(cases=_descent_cases, reference=_descent, rtol=1e-9, atol=1e-12),
    "standardize": Part(cases=_standardize_cases, reference=_standardize, rtol=1e-8, atol=1e-8),
    "cross_validation": Part(cases=_cv_cases, reference=_cross_validation, rtol=1e-6, atol=1e-8),
}
