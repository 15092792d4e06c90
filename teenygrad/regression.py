"""Chapter 1's model, fitted: a linear model $\\hat y = Xw$, and the pipeline exercise 1 asks for.

Plain numpy, as in chapter 1. `X` is an (n, d) float array whose column 0 is the bias column of ones (the
chapter's `add_bias`), `y` holds n targets and `w` d weights. The ridge loss is
$L_\\lambda(w) = \\frac1n \\lVert Xw - y \\rVert^2 + \\lambda \\sum_{j \\ge 1} w_j^2$ (the bias, w_0, is not penalised);
$\\lambda = 0$ is chapter 1's mean squared error.

    ridge_gradient(X, y, w, lam)            exercise 1: the gradient of the ridge loss
    solve_spd(A, b)                         exercise 1: solve a symmetric positive definite system (Cholesky)
    fit_ridge(X, y, lam)                    exercise 1: its minimum in closed form, for one lam or a path of them
    gradient_descent(loss, grad, w0, lr)    exercise 1: walk down any smooth loss, until a stopping rule says enough
    kfold_rmse(X, y, k, fit, seed)          exercise 1: the test RMSE of each of k folds
    choose_lambda(X, y, lams, k, fit, seed) exercise 1: the lam that k-fold cross-validation picks
    fit_gd(X, y, lr, lam, ...)              the ridge fit by gradient descent (the pieces above, put together)
    fit_standardized(X, y, lam)             the fit on raw features: standardize, fit, weights back on the raw ones

`teenygrad.preprocessing` holds the other half: `train_test_split`, `standardize` and `unstandardize`.
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from teenygrad import preprocessing
from teenygrad.edition import exercise


def predict(X: np.ndarray, w: np.ndarray) -> np.ndarray:
    """The model's predictions $\\hat y = Xw$."""
    return X @ w


def ridge_loss(X: np.ndarray, y: np.ndarray, w: np.ndarray, lam: float = 0.0) -> float:
    """$L_\\lambda(w)$, the loss every fit of this module minimises."""
    return float(np.mean((X @ w - y) ** 2) + lam * np.sum(w[1:] ** 2))


@exercise("01-regression", "ridge_gradient")
def ridge_gradient(X: np.ndarray, y: np.ndarray, w: np.ndarray, lam: float) -> np.ndarray:
    """The gradient of `ridge_loss` with respect to w (derive it: the chapter's MSE gradient, plus the penalty's,
    which leaves the bias w_0 alone).

    Returns a new (d,) array; w is not changed. No input checks: X (n, d), y (n,) and w (d,) are taken as given."""
    penalty = 2.0 * lam * w
    penalty[0] = 0.0  # the bias is not penalised
    return 2.0 / len(y) * X.T @ (X @ w - y) + penalty


@exercise("01-regression", "closed_form")
def solve_spd(A: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The x with A x = b, for a symmetric positive definite (d, d) A, by the *Cholesky factorisation*
    $A = L L^\\top$ ($L$ lower triangular with a positive diagonal) and two substitutions: $L z = b$ forwards,
    then $L^\\top x = z$ backwards. No inverse is formed; A and b are not changed.

    Column j of L: $L_{jj} = \\sqrt{A_{jj} - \\sum_{k<j} L_{jk}^2}$ and $L_{ij} = (A_{ij} - \\sum_{k<j} L_{ik}
    L_{jk}) / L_{jj}$ for i > j. The number under the root is the *pivot*; raises ValueError when a pivot is not
    greater than 1e-12 times the largest diagonal entry of A (a NaN pivot, or a largest diagonal entry <= 0,
    included): A is singular (or not positive definite) to working precision, where a pivot of a singular A is
    rounding noise, about 1e-16 of that entry."""
    A, b = np.asarray(A, dtype=np.float64), np.asarray(b, dtype=np.float64)
    d = len(A)
    L = np.zeros((d, d))
    tiny = 1e-12 * np.max(np.diag(A), initial=0.0)
    for j in range(d):
        pivot = A[j, j] - L[j, :j] @ L[j, :j]
        if not pivot > tiny:
            raise ValueError(f"solve_spd: pivot {pivot:.3g} of column {j}: the matrix is singular to working precision")
        L[j, j] = np.sqrt(pivot)
        L[j + 1:, j] = (A[j + 1:, j] - L[j + 1:, :j] @ L[j, :j]) / L[j, j]
    z = np.zeros(d)
    for i in range(d):  # L z = b, top row first
        z[i] = (b[i] - L[i, :i] @ z[:i]) / L[i, i]
    x = np.zeros(d)
    for i in reversed(range(d)):  # L^T x = z, bottom row first: row i of L^T is column i of L
        x[i] = (z[i] - L[i + 1:, i] @ x[i + 1:]) / L[i, i]
    return x


@exercise("01-regression", "closed_form")
def fit_ridge(X: np.ndarray, y: np.ndarray, lam: float | np.ndarray) -> np.ndarray:
    """The w minimising `ridge_loss`. Setting its gradient to zero gives the d x d system
    $(X^\\top X + n\\lambda D)\\, w = X^\\top y$, $D$ the identity except $D_{00} = 0$, solved with `solve_spd`
    (never inverted): its matrix is symmetric, and positive definite unless lam = 0 and the columns of X are
    linearly dependent. With lam > 0 and a bias column of ones there is one solution even when n < d (though a lam
    so small that the matrix is singular to working precision is refused by `solve_spd`, as lam = 0 would be).

    `lam` is a number (returns w, shape (d,)) or a 1-D array of them, a *regularisation path* (returns one row of
    weights per lam, shape (len(lam), d)); $X^\\top X$ and $X^\\top y$ are formed once for the whole path.

    Raises ValueError when X is not 2-D, y not 1-D with one target per row of X, a lam is negative or not finite,
    or (from `solve_spd`) when a lam is 0 and X^T X is singular: least squares has no single answer."""
    X, y = np.asarray(X, dtype=np.float64), np.asarray(y, dtype=np.float64)
    if X.ndim != 2 or y.ndim != 1 or len(X) != len(y):
        raise ValueError(f"fit_ridge: X must be (n, d) and y (n,), got {X.shape} and {y.shape}")
    lams = np.asarray(lam, dtype=np.float64)
    if lams.ndim > 1 or not np.all(np.isfinite(lams)) or np.any(lams < 0):
        raise ValueError(f"fit_ridge: lam must be a number >= 0 or a 1-D array of them, got {lam!r}")
    n, d = X.shape
    gram, Xty = X.T @ X, X.T @ y  # shared by every lam of a path
    D = np.eye(d)
    D[0, 0] = 0.0
    weights = [solve_spd(gram + n * lam_i * D, Xty) for lam_i in lams.reshape(-1)]
    return np.array(weights) if lams.ndim == 1 else weights[0]


@exercise("01-regression", "gradient_descent")
def gradient_descent(loss: Callable[[np.ndarray], float], grad: Callable[[np.ndarray], np.ndarray], w0: np.ndarray,
                     lr: float, max_steps: int = 10_000, tol: float = 1e-6) -> tuple[np.ndarray, np.ndarray]:
    """Steps $w \\leftarrow w - \\eta \\nabla L(w)$ from `w0` (not changed) until the stopping rule says enough.

    The stopping rule: before each step, if $\\lVert \\nabla L(w) \\rVert \\le$ `tol` $\\cdot \\lVert \\nabla L(w_0)
    \\rVert$ (the slope has fallen to a fraction `tol` of where it started; the norm is the Euclidean one), stop
    without stepping; after `max_steps` steps, stop anyway. `tol = 0` runs all `max_steps` steps unless the
    gradient is exactly zero.

    Returns the final w and the losses: loss(w0), then the loss after every step taken (so len = steps + 1).
    Raises ValueError when lr <= 0, max_steps < 0 or tol < 0, and when a step makes the loss not finite or larger
    than loss(w0): gradient descent has diverged (the learning rate is too large for this loss). The comparison is
    strict and exact: started at the minimum with tol = 0, a rise by rounding alone also raises."""
    if not lr > 0 or max_steps < 0 or not tol >= 0:
        raise ValueError(f"gradient_descent: need lr > 0, max_steps >= 0, tol >= 0; got {lr}, {max_steps}, {tol}")
    w = np.array(w0, dtype=np.float64)  # a copy: w0 is the caller's
    losses = [loss(w)]
    g = grad(w)
    stop = tol * np.linalg.norm(g)
    for _ in range(max_steps):
        if np.linalg.norm(g) <= stop:
            break
        w = w - lr * g
        losses.append(loss(w))
        if not np.isfinite(losses[-1]) or losses[-1] > losses[0]:
            raise ValueError(f"gradient_descent diverged at step {len(losses) - 1} (loss {losses[-1]:.3g}, "
                             f"from {losses[0]:.3g}): lr = {lr} is too large for this loss")
        g = grad(w)
    return w, np.array(losses)


@exercise("01-regression", "cross_validation")
def kfold_rmse(X: np.ndarray, y: np.ndarray, k: int, fit: Callable[[np.ndarray, np.ndarray], np.ndarray],
               seed: int = 0) -> np.ndarray:
    """k-fold cross-validation: the test RMSE of each fold, a (k,) array.

    The rows are shuffled with `np.random.default_rng(seed).permutation(n)` and cut into k consecutive folds
    as `np.array_split` cuts (the first n mod k folds one row longer). Fold f is the test set of round f:
    `fit(X_rest, y_rest)`, on the other folds' rows in the order of the permutation, gives the weights, scored
    by the RMSE on fold f's rows. Raises ValueError unless 2 <= k <= n and X and y have the same rows."""
    n = len(y)
    if len(X) != n or not 2 <= k <= n:
        raise ValueError(f"kfold_rmse: k must be between 2 and the number of rows ({n}), got {k}")
    folds = np.array_split(np.random.default_rng(seed).permutation(n), k)
    scores = []
    for f, test in enumerate(folds):
        train = np.concatenate([fold for g, fold in enumerate(folds) if g != f])
        w = fit(X[train], y[train])
        scores.append(np.sqrt(np.mean((X[test] @ w - y[test]) ** 2)))
    return np.array(scores)


@exercise("01-regression", "cross_validation")
def choose_lambda(X: np.ndarray, y: np.ndarray, lams: np.ndarray, k: int,
                  fit: Callable[[np.ndarray, np.ndarray, float], np.ndarray],
                  seed: int = 0) -> tuple[float, np.ndarray]:
    """The penalty k-fold cross-validation picks, by the *one-standard-error rule*, and the scores behind it.

    Every lam in `lams` is scored on the same k folds (`kfold_rmse` with this `seed`, fitting with
    `fit(X_rest, y_rest, lam)`): row i of the returned (len(lams), k) scores. Lam i's mean score is $m_i$ and
    its standard error $s_i$ = the sample standard deviation of its k scores (ddof = 1) / $\\sqrt k$. With
    $i^*$ the lam of the lowest mean (the first, on a tie), the rule picks the *largest* lam whose mean is at
    most $m_{i^*} + s_{i^*}$: the simplest model that is not measurably worse than the best.

    Returns (the chosen lam as a float, the scores). Raises ValueError when `lams` is empty or holds a
    negative or non-finite value (and as `kfold_rmse` does for k)."""
    lams = np.asarray(lams, dtype=np.float64).reshape(-1)
    if len(lams) == 0 or not np.all(np.isfinite(lams)) or np.any(lams < 0):
        raise ValueError(f"choose_lambda: lams must be one or more numbers >= 0, got {lams}")
    scores = np.array([kfold_rmse(X, y, k, lambda A, b, lam=lam: fit(A, b, lam), seed) for lam in lams])
    means = scores.mean(axis=1)
    errors = scores.std(axis=1, ddof=1) / np.sqrt(k)
    best = int(np.argmin(means))
    within = means <= means[best] + errors[best]
    return float(lams[within].max()), scores


def fit_gd(X: np.ndarray, y: np.ndarray, lr: float, lam: float = 0.0, max_steps: int = 10_000,
           tol: float = 1e-6) -> tuple[np.ndarray, np.ndarray]:
    """The ridge fit by `gradient_descent` from w = 0, with `ridge_gradient`: (w, the losses on the way)."""
    return gradient_descent(lambda w: ridge_loss(X, y, w, lam), lambda w: ridge_gradient(X, y, w, lam),
                            np.zeros(X.shape[1]), lr, max_steps, tol)


def fit_standardized(X: np.ndarray, y: np.ndarray, lam: float = 0.0) -> np.ndarray:
    """The ridge fit on raw features: `X` (n, d) has the bias column first, as everywhere in this module.
    Standardize the other columns (on these rows only), fit on them, and return the weights for the raw `X`
    (`unstandardize`): the same predictions, from a well-conditioned system. As `kfold_rmse`'s fit, each round
    standardizes on its own training rows, so the test fold never leaks into the statistics."""
    Z, _, mean, std = preprocessing.standardize(X[:, 1:], X[:0, 1:])
    w = fit_ridge(np.column_stack([np.ones(len(Z)), Z]), y, lam)
    return preprocessing.unstandardize(w, mean, std)
