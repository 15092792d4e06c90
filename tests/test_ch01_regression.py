"""Chapter 1's pieces: teenygrad.preprocessing and teenygrad.regression against oracles, the 01-regression judge against the solutions
notebook, and the figures the chapter's prose states."""
from __future__ import annotations

import math
import statistics
from pathlib import Path

import nbformat
import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import teenygrad
from autograder.judges import judge, write_cases
from autograder.judges import regression as regression_judge
from autograder.judges.regression import PARTS
from teenygrad import preprocessing, regression
from teenygrad.datasets import load_housing
from teenygrad.grading import GRADING_DIR_ENV, report

from conftest import book_figures, solution_cells

REPO = Path(__file__).resolve().parent.parent
CHAPTER = REPO / "chapters" / "01-regression.ipynb"
SOLUTIONS = REPO / "solutions" / "01-regression.ipynb"
POINTS = {"ridge_gradient": 2, "closed_form": 2, "gradient_descent": 1, "standardize": 1, "cross_validation": 2}

finite = st.floats(-1e3, 1e3, allow_nan=False, allow_infinity=False)


# --- train_test_split --------------------------------------------------------------------------------------

@st.composite
def split_problems(draw):
    n = draw(st.integers(2, 200))
    fraction = draw(st.floats(0.01, 0.99))
    assume(math.ceil(fraction * n) < n)
    X = draw(hnp.arrays(np.float64, (n, draw(st.integers(1, 4))), elements=finite))
    return X, fraction, draw(st.integers(0, 2**32 - 1))


@settings(deadline=None)
@given(split_problems())
def test_split_is_a_partition_of_the_rows(problem):
    X, fraction, seed = problem
    n = len(X)
    ids = np.arange(n)  # y = the row number, so we can tell where every row went
    X_train, X_test, id_train, id_test = preprocessing.train_test_split(X, ids, test_fraction=fraction, seed=seed)
    assert len(id_test) == math.ceil(fraction * n) and len(id_train) == n - len(id_test)
    assert sorted(np.concatenate([id_train, id_test]).tolist()) == list(range(n))  # every row exactly once
    np.testing.assert_array_equal(X_train, X[id_train])  # X and y rows stay paired
    np.testing.assert_array_equal(X_test, X[id_test])


@settings(deadline=None)
@given(split_problems())
def test_split_is_deterministic_per_seed(problem):
    X, fraction, seed = problem
    y = np.arange(len(X))
    first = preprocessing.train_test_split(X, y, test_fraction=fraction, seed=seed)
    second = preprocessing.train_test_split(X, y, test_fraction=fraction, seed=seed)
    for a, b in zip(first, second):
        np.testing.assert_array_equal(a, b)


def test_split_seeds_differ_and_default_is_80_20():
    X, y, _ = load_housing()
    X_train, X_test, y_train, y_test = preprocessing.train_test_split(X, y)
    assert (len(y_train), len(y_test)) == (436, 110)
    other = preprocessing.train_test_split(X, y, seed=1)[3]
    assert not np.array_equal(y_test, other)


@pytest.mark.parametrize("fraction", [0.0, 1.0, -0.2, 1.5, float("nan")])
def test_split_rejects_bad_fractions(fraction):
    with pytest.raises(ValueError, match="test_fraction"):
        preprocessing.train_test_split(np.zeros((10, 2)), np.zeros(10), test_fraction=fraction)


def test_split_rejects_mismatched_lengths_and_empty_training_sets():
    with pytest.raises(ValueError, match="same number of rows"):
        preprocessing.train_test_split(np.zeros((10, 2)), np.zeros(9))
    with pytest.raises(ValueError, match="no rows to train"):
        preprocessing.train_test_split(np.zeros((2, 2)), np.zeros(2), test_fraction=0.6)


# --- standardize -------------------------------------------------------------------------------------------

@st.composite
def standardize_problems(draw):
    d = draw(st.integers(1, 5))
    X_train = draw(hnp.arrays(np.float64, (draw(st.integers(2, 40)), d), elements=finite))
    X_test = draw(hnp.arrays(np.float64, (draw(st.integers(1, 20)), d), elements=finite))
    return X_train, X_test


def _oracle_stats(X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Column means and population standard deviations by the standard library (exact-rounding arithmetic)."""
    columns = X.T.tolist()
    return np.array([statistics.fmean(c) for c in columns]), np.array([statistics.pstdev(c) for c in columns])


@settings(deadline=None)
@given(standardize_problems())
def test_standardize_uses_training_statistics(problem):
    X_train, X_test = problem
    Z_train, Z_test, mean, std = preprocessing.standardize(X_train, X_test)
    want_mean, want_std = _oracle_stats(X_train)
    np.testing.assert_allclose(mean, want_mean, rtol=1e-9, atol=1e-9)
    spread = want_std > 1e-3  # clearly non-constant columns: exact checks
    np.testing.assert_allclose(std[spread], want_std[spread], rtol=1e-9)
    np.testing.assert_allclose(Z_train[:, spread].mean(axis=0), 0.0, atol=1e-9)
    np.testing.assert_allclose(Z_train[:, spread].std(axis=0), 1.0, rtol=1e-9)
    np.testing.assert_allclose(Z_test[:, spread], (X_test[:, spread] - want_mean[spread]) / want_std[spread],
                               rtol=1e-9, atol=1e-9)
    constant = want_std == 0  # guarded: zeros (up to the rounding of the mean), not NaN
    assert np.all(std[constant] == 1.0)
    assert np.all(np.abs(Z_train[:, constant]) <= 1e-12 * (1 + np.abs(X_train[:, constant]).max(initial=0)))
    assert np.all(np.isfinite(Z_train)) and np.all(np.isfinite(Z_test))


@settings(deadline=None)
@given(standardize_problems(), st.floats(-100, 100), st.floats(0.5, 10))
def test_standardize_ignores_the_test_set(problem, shift, scale):
    X_train, X_test = problem
    first = preprocessing.standardize(X_train, X_test)
    second = preprocessing.standardize(X_train, X_test * scale + shift)
    for k in (0, 2, 3):  # Z_train, mean, std: nothing learned from the test rows
        np.testing.assert_array_equal(first[k], second[k])


def test_standardize_rejects_mismatched_columns():
    with pytest.raises(ValueError):
        preprocessing.standardize(np.zeros((5, 3)), np.zeros((2, 4)))


# --- teenygrad.regression and the pieces of exercise 1 against oracles ----------------------------------------

def _design(rng, n, d):
    return np.column_stack([np.ones(n), rng.normal(size=(n, d - 1))])


@pytest.mark.parametrize("seed", range(5))
def test_ridge_gradient_is_the_derivative_of_the_ridge_loss(seed):
    rng = np.random.default_rng(seed)
    n, d = int(rng.integers(1, 30)), int(rng.integers(1, 8))
    X, y, w, lam = _design(rng, n, d), rng.normal(size=n), rng.normal(size=d), float(rng.uniform(0, 2))
    h = 1e-6
    numeric = np.array([(regression.ridge_loss(X, y, w + h * e, lam) - regression.ridge_loss(X, y, w - h * e, lam))
                        / (2 * h) for e in np.eye(d)])
    before = w.copy()
    assert np.allclose(regression.ridge_gradient(X, y, w, lam), numeric, rtol=1e-5, atol=1e-6)
    assert np.array_equal(w, before)


@settings(deadline=None, max_examples=50)
@given(st.integers(1, 12), st.integers(0, 2**32 - 1))
def test_solve_spd_solves_what_numpy_solves(d, seed):
    rng = np.random.default_rng(seed)
    B = rng.normal(size=(d, d))
    A, b = B @ B.T + 0.1 * np.eye(d), rng.normal(size=d)
    before = A.copy(), b.copy()
    x = regression.solve_spd(A, b)
    np.testing.assert_allclose(x, np.linalg.solve(A, b), rtol=1e-8, atol=1e-10)
    assert np.array_equal(A, before[0]) and np.array_equal(b, before[1])


@pytest.mark.parametrize("rank, d", [(0, 1), (1, 3), (2, 4), (5, 9)])
def test_solve_spd_refuses_a_singular_matrix(rank, d):
    B = np.random.default_rng(d).normal(size=(d, rank))
    with pytest.raises(ValueError, match="singular"):
        regression.solve_spd(B @ B.T, np.ones(d))


@pytest.mark.parametrize("seed", range(5))
def test_fit_ridge_is_the_minimum_and_gradient_descent_finds_it(seed):
    rng = np.random.default_rng(seed)
    n, d, lam = int(rng.integers(1, 20)), int(rng.integers(1, 8)), float(rng.uniform(0.05, 2))
    X, y = _design(rng, n, d), rng.normal(size=n)
    w = regression.fit_ridge(X, y, lam)
    assert np.allclose(regression.ridge_gradient(X, y, w, lam), 0, atol=1e-9)
    # the same minimum as ordinary least squares on X with sqrt(n lam) D stacked under it (an oracle via lstsq)
    D = np.eye(d)
    D[0, 0] = 0
    oracle = np.linalg.lstsq(np.vstack([X, np.sqrt(n * lam) * D]), np.concatenate([y, np.zeros(d)]), rcond=None)[0]
    assert np.allclose(w, oracle, rtol=1e-6, atol=1e-8)
    lr = 1.0 / np.linalg.eigvalsh(2.0 / n * X.T @ X + 2 * lam * D).max()
    w_gd, losses = regression.fit_gd(X, y, lr, lam, max_steps=3000, tol=0.0)
    assert len(losses) <= 3001 and np.all(np.diff(losses) <= 1e-12) and np.allclose(w_gd, w, atol=1e-5)


def test_fit_ridge_on_a_path_and_its_errors():
    rng = np.random.default_rng(3)
    X, y = _design(rng, 40, 5), rng.normal(size=40)
    lams = np.array([0.0, 0.01, 1.0])
    path = regression.fit_ridge(X, y, lams)
    assert path.shape == (3, 5) and np.allclose(path[0], np.linalg.lstsq(X, y, rcond=None)[0])
    assert all(np.allclose(path[i], regression.fit_ridge(X, y, lam)) for i, lam in enumerate(lams))
    assert np.allclose(regression.predict(X, np.ones(5)), X.sum(axis=1))
    for bad in [(X, y, -0.5), (X, y, np.array([[0.1]])), (X, y, float("nan")), (X[:, 1], y, 0.1), (X, y[:3], 0.1),
                (np.column_stack([X, X[:, 2]]), y, 0.0), (X[:3], y[:3], 0.0)]:
        with pytest.raises(ValueError):
            regression.fit_ridge(*bad)
    assert regression.fit_ridge(np.column_stack([X, X[:, 2]]), y, 0.1).shape == (6,)  # a penalty makes it unique


def _quadratic(rng, d, top=4.0):
    U = np.linalg.qr(rng.normal(size=(d, d)))[0]
    Q = U @ np.diag(np.linspace(0.5, top, d)) @ U.T
    c = rng.normal(size=d)
    return (lambda w: 0.5 * w @ Q @ w - c @ w), (lambda w: Q @ w - c), np.linalg.solve(Q, c)


@settings(deadline=None, max_examples=30)
@given(st.integers(1, 6), st.sampled_from([1e-2, 1e-4, 1e-8]), st.integers(0, 2**32 - 1))
def test_gradient_descent_stops_where_the_rule_says(d, tol, seed):
    rng = np.random.default_rng(seed)
    loss, grad, w_star = _quadratic(rng, d)
    w0 = rng.normal(size=d)
    before = w0.copy()
    w, losses = regression.gradient_descent(loss, grad, w0, 0.25, 10_000, tol)
    steps = len(losses) - 1
    assert np.array_equal(w0, before) and np.isclose(losses[0], loss(w0)) and np.isclose(losses[-1], loss(w))
    # replay the steps independently: the rule holds at the end, and did not hold one step earlier
    v = w0.copy()
    norms = [np.linalg.norm(grad(v))]
    for _ in range(steps):
        v = v - 0.25 * grad(v)
        norms.append(np.linalg.norm(grad(v)))
    np.testing.assert_allclose(w, v, rtol=1e-12, atol=1e-12)
    assert norms[-1] <= tol * norms[0] and all(g > tol * norms[0] for g in norms[:-1])
    assert np.linalg.norm(w - w_star) <= norms[-1] / 0.5 + 1e-12  # the gradient bounds the distance (lambda_min)


def test_gradient_descent_caps_refuses_and_diverges():
    rng = np.random.default_rng(0)
    loss, grad, _ = _quadratic(rng, 3)
    w, losses = regression.gradient_descent(loss, grad, np.zeros(3), 0.25, 5, 0.0)
    assert len(losses) == 6
    w, losses = regression.gradient_descent(loss, grad, np.zeros(3), 0.25, 0, 0.0)
    assert len(losses) == 1 and np.array_equal(w, np.zeros(3))
    flat = regression.gradient_descent(lambda w: float(w @ w), lambda w: 2 * w, np.zeros(2), 0.1, 50, 0.0)
    assert len(flat[1]) == 1  # already at the minimum: no step
    with pytest.raises(ValueError, match="diverged"):
        regression.gradient_descent(loss, grad, np.ones(3), 0.6, 1000, 1e-6)  # 0.6 > 2 / 4
    for lr, steps, tol in [(0.0, 10, 1e-3), (0.1, -1, 1e-3), (0.1, 10, -1.0)]:
        with pytest.raises(ValueError):
            regression.gradient_descent(loss, grad, np.zeros(3), lr, steps, tol)


@pytest.mark.parametrize("seed", range(5))
def test_unstandardize_keeps_every_prediction(seed):
    rng = np.random.default_rng(seed)
    n, d = int(rng.integers(2, 30)), int(rng.integers(1, 8))
    X = rng.normal(loc=rng.uniform(-100, 100, d), scale=rng.uniform(0.1, 30, d), size=(n, d))
    Z, _, mean, std = preprocessing.standardize(X, X[:1])
    w, y_mean, y_std = rng.normal(size=d + 1), float(rng.uniform(-50, 50)), float(rng.uniform(0.5, 20))
    v = preprocessing.unstandardize(w, mean, std, y_mean, y_std)
    assert np.allclose(np.column_stack([np.ones(n), X]) @ v, y_mean + y_std * (np.column_stack([np.ones(n), Z]) @ w))
    assert np.allclose(preprocessing.unstandardize(w, mean, std), preprocessing.unstandardize(w, mean, std, 0.0, 1.0))
    for bad in [(w[:-1], mean, std), (w, mean, -std), (w, mean, std, 0.0, 0.0)]:
        with pytest.raises(ValueError):
            preprocessing.unstandardize(*bad)


def test_fit_standardized_is_least_squares_on_the_raw_features():
    X, y, _ = load_housing()
    A = np.column_stack([np.ones(len(X)), X])
    assert np.allclose(regression.fit_standardized(A, y), np.linalg.lstsq(A, y, rcond=None)[0], rtol=1e-6)


def test_kfold_rmse_folds_partition_the_rows():
    rng = np.random.default_rng(0)
    for n, k in [(10, 3), (7, 7), (20, 2), (13, 5)]:
        X, y = _design(rng, n, 2), rng.normal(size=n)
        seen = []

        def fit(A, b):
            seen.append(b.copy())
            return np.linalg.lstsq(A, b, rcond=None)[0]

        scores = regression.kfold_rmse(X, y, k, fit, seed=n)
        assert scores.shape == (k,) and np.all(scores >= 0)
        tested = [set(y) - set(b) for b in seen]  # the targets each round left out: its fold (y is continuous)
        assert sorted(len(t) for t in tested) == sorted(len(f) for f in np.array_split(np.arange(n), k))
        assert set().union(*tested) == set(y) and sum(len(t) for t in tested) == n
    with pytest.raises(ValueError, match="k must be"):
        regression.kfold_rmse(X, y, 1, fit)


@settings(deadline=None, max_examples=30)
@given(st.integers(6, 40), st.integers(2, 6), st.lists(st.sampled_from([0.0, 0.01, 0.1, 0.5, 1.0, 3.0, 10.0]),
                                                       min_size=1, max_size=6, unique=True), st.integers(0, 999))
def test_choose_lambda_is_the_one_standard_error_rule(n, k, lams, seed):
    assume(k <= n)
    rng = np.random.default_rng(seed)
    X, y = _design(rng, n, 3), rng.normal(size=n)
    fit = lambda A, b, lam: np.linalg.lstsq(A, b, rcond=None)[0] / (1.0 + lam)  # noqa: E731 (shrinks with lam)
    lam, scores = regression.choose_lambda(X, y, np.array(lams), k, fit, seed=seed)
    rows = [regression.kfold_rmse(X, y, k, lambda A, b, lam=lam: fit(A, b, lam), seed=seed) for lam in lams]
    np.testing.assert_array_equal(scores, np.array(rows))
    # the rule, from the definition, one lam at a time with the standard library
    mean = [statistics.fmean(r) for r in rows]
    error = [statistics.stdev(r) / math.sqrt(k) for r in rows]
    best = mean.index(min(mean))
    assert isinstance(lam, float) and lam == max(v for v, m in zip(lams, mean) if m <= mean[best] + error[best] + 1e-12)
    with pytest.raises(ValueError):
        regression.choose_lambda(X, y, [], k, fit)


# --- the 01-regression judge against the solutions notebook -----------------------------------------------

def test_solutions_notebook_matches_the_judge():
    solutions, tests = solution_cells(SOLUTIONS)  # the notebook's house rules: tests/test_notebooks.py
    assert set(solutions) == set(tests) == set(PARTS) == set(POINTS)
    for part, (points, hidden) in tests.items():
        assert points == POINTS[part]
        assert f'report("{part}"' in hidden and "assert" not in hidden


def _hidden(name):
    """A function of the solution notebook's hidden tests (they call teenygrad, where the pieces live)."""
    for cell in nbformat.read(SOLUTIONS, as_version=4).cells:
        if "### BEGIN HIDDEN TESTS" in cell.source and f"def {name}(" in cell.source:
            namespace = {"np": np, "tg": teenygrad}
            exec(cell.source.split("### BEGIN HIDDEN TESTS")[1].split("report(")[0], namespace)
            return namespace[name]
    raise KeyError(name)


HIDDEN = {"ridge_gradient": "gradient_and_w", "closed_form": "run_fit_ridge", "gradient_descent": "run_gradient_descent",
          "standardize": "run_standardize", "cross_validation": "run_cross_validation"}


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_the_package_passes_the_judge(seed, tmp_path, monkeypatch):
    """The judge's references and the book's pieces agree, through the notebook's own hidden tests."""
    drawn = write_cases(PARTS, tmp_path, seed)
    monkeypatch.setenv(GRADING_DIR_ENV, str(tmp_path))
    for part, name in HIDDEN.items():
        report(part, _hidden(name))
    assert judge(PARTS, drawn, tmp_path) == {part: None for part in PARTS}


def test_the_judges_stand_ins_are_the_hidden_tests():
    """The losses and the fit the hidden tests build are the ones the judge's references use."""
    rng = np.random.default_rng(0)
    for Q, c, w0, lr, steps, tol, kind in PARTS["gradient_descent"].cases(rng):
        if lr > 0:
            got = _hidden("run_gradient_descent")(Q, c, w0, lr, steps, tol, kind)
            want = regression_judge._descent(Q, c, w0, lr, steps, tol, kind)
            assert len(got if isinstance(got, tuple) else (got,)) == len(want)
    A, b = rng.normal(size=(9, 3)), rng.normal(size=9)
    fit = _hidden("run_cross_validation").__globals__["grader_fit"]
    assert np.allclose(fit(A, b, 0.3), regression_judge.grader_fit(A, b, 0.3))


def _descent_absolute(Q, c, w0, lr, steps, tol, kind):
    loss, grad = regression_judge.grader_loss(Q, c, kind)
    w, losses = w0.copy(), [loss(w0)]
    while len(losses) <= steps and np.linalg.norm(grad(w)) > tol:
        w = w - lr * grad(w)
        losses.append(loss(w))
    return w, np.array(losses), w0


WRONG = {  # plausible mistakes the judge must catch
    "ridge_gradient": lambda X, y, w, lam: (2 / len(y) * X.T @ (X @ w - y) + 2 * lam * w, w),  # penalises the bias
    "closed_form": lambda A, b, lam, mode: (np.linalg.solve(A, b) if mode == 2 else  # lam, not n lam
                                            np.linalg.solve(A.T @ A + lam * regression_judge._no_bias(A.shape[1]), A.T @ b)),
    "gradient_descent": lambda *case: _descent_absolute(*case),  # tol as an absolute slope, not a fraction
    "standardize": lambda Xa, Xb, w, mean, std, ym, ys: (  # the sample standard deviation, ddof = 1
        *preprocessing.standardize(Xa, Xb)[:2], Xa.mean(0), Xa.std(0, ddof=1) if len(Xa) > 1 else np.ones(Xa.shape[1]),
        preprocessing.unstandardize(w, mean, std, ym, ys)),
    "cross_validation": lambda X, y, lams, k, seed: (  # the lowest mean, not the one-standard-error rule
        regression_judge._kfold(X, y, k, lambda A, b: regression_judge.grader_fit(A, b, lams[0]), seed),
        *(lambda s: (np.float64(lams[np.argmin(s.mean(1))]), s))(np.array(
            [regression_judge._kfold(X, y, k, lambda A, b, lam=lam: regression_judge.grader_fit(A, b, lam), seed)
             for lam in lams]))),
}


def test_judge_rejects_wrong_answers(tmp_path, monkeypatch):
    drawn = write_cases(PARTS, tmp_path, seed=7)
    monkeypatch.setenv(GRADING_DIR_ENV, str(tmp_path))
    for part, fn in WRONG.items():
        report(part, fn)
    verdicts = judge(PARTS, drawn, tmp_path)
    assert all(verdicts[part] for part in PARTS), verdicts


def test_judge_cases_cover_the_edge_cases():
    rng = np.random.default_rng(0)
    shapes = {case[0].shape for case in PARTS["ridge_gradient"].cases(rng)}
    assert any(n == 1 for n, _ in shapes) and any(d == 1 for _, d in shapes), shapes
    ridge = PARTS["closed_form"].cases(rng)
    assert any(mode == 0 and A.shape[0] < A.shape[1] and lam > 0 for A, _, lam, mode in ridge)
    assert any(mode == 1 for *_, mode in ridge) and any(mode == 2 for *_, mode in ridge)
    answers = [PARTS["closed_form"].reference(*case) for case in ridge]
    assert sum(len(a) == 1 and a[0].shape == (1,) and a[0][0] == -1 for a in answers) >= 3  # the errors
    descents = [PARTS["gradient_descent"].reference(*case) for case in PARTS["gradient_descent"].cases(rng)]
    assert sum(len(a) == 1 for a in descents) == 2  # one diverges, one has lr <= 0
    stopped = [len(a[1]) - 1 for a in descents if len(a) == 3]
    assert 0 in stopped and any(0 < s < 400 for s in stopped)  # no step at the minimum; stopped by the rule
    cv = PARTS["cross_validation"].cases(rng)
    assert any(k == len(y) for _, y, _, k, _ in cv)  # leave-one-out
    picks = [PARTS["cross_validation"].reference(*case) for case in cv]
    assert any(len(p) == 3 and p[1] != lams[np.argmin(p[2].mean(1))] for p, (_, _, lams, _, _) in zip(picks, cv))


# --- the chapter -------------------------------------------------------------------------------------------

# The chapter's structure (title, headings, no outputs, exercise link): tests/test_notebooks.py



def _recomputed_figures() -> dict[str, float]:
    """The chapter's test figures, computed independently with teenygrad.preprocessing and lstsq."""
    X, y, _ = load_housing()
    X_train, X_test, y_train, y_test = preprocessing.train_test_split(X, y, test_fraction=0.2, seed=0)
    Z_train, Z_test, _, _ = preprocessing.standardize(X_train, X_test)
    ones = lambda n: np.ones((n, 1))
    preds = {"mean": np.full(len(y_test), y_train.mean())}
    for name, (A_train, A_test) in {"lotsize": (X_train[:, :1], X_test[:, :1]), "all": (Z_train, Z_test)}.items():
        w = np.linalg.lstsq(np.hstack([ones(len(A_train)), A_train]), y_train, rcond=None)[0]
        preds[name] = np.hstack([ones(len(A_test)), A_test]) @ w
    figures = {}
    for name, pred in preds.items():
        figures[f"ch1_test_rmse_{name}"] = float(np.sqrt(np.mean((y_test - pred) ** 2)))
        figures[f"ch1_test_r2_{name}"] = float(1 - np.sum((y_test - pred) ** 2) / np.sum((y_test - y_test.mean()) ** 2))
    return figures


def test_figures_stated_in_the_prose():
    fig = _recomputed_figures()
    # "about 30,000 dollars ... R^2 slightly below zero"
    assert abs(fig["ch1_test_rmse_mean"] - 30_000) < 500 and -0.1 < fig["ch1_test_r2_mean"] < 0
    # "about 22,600 dollars ... explains about 40% of the spread"
    assert abs(fig["ch1_test_rmse_lotsize"] - 22_600) < 100 and abs(fig["ch1_test_r2_lotsize"] - 0.40) < 0.02
    # "about 15,000 dollars ... about three quarters of the variation"
    assert abs(fig["ch1_test_rmse_all"] - 15_000) < 300 and abs(fig["ch1_test_r2_all"] - 0.75) < 0.03

    # the fits on all 546 houses earlier in the chapter
    X, y, _ = load_housing()
    rmse = lambda A, w: np.sqrt(np.mean((A @ w - y) ** 2))
    A_lot = np.column_stack([np.ones(len(X)), X[:, 0]])
    assert abs(rmse(A_lot, np.array([y.mean(), 0.0])) - 27_000) < 500  # "a typical miss of about 27,000"
    w_lot = np.linalg.solve(A_lot.T @ A_lot, A_lot.T @ y)
    assert abs(w_lot[0] - 34_000) < 500 and abs(w_lot[1] - 6.6) < 0.05  # "about 34,000 ... 6.6 per square foot"
    assert abs(rmse(A_lot, w_lot) - 22_500) < 100  # "about 22,500"
    A_raw = np.column_stack([np.ones(len(X)), X])
    A_all = np.column_stack([np.ones(len(X)), (X - X.mean(0)) / X.std(0)])
    assert 3e8 < np.linalg.cond(A_raw.T @ A_raw) < 3e9 and np.linalg.cond(A_all.T @ A_all) < 10  # "a billion" -> "single digits"
    w_all = np.linalg.solve(A_all.T @ A_all, A_all.T @ y)
    assert abs(rmse(A_all, w_all) - 15_000) < 500  # "drops to about 15,000"
    # gradient descent, lr 0.1 from zero: the gap reaches the float64 floor after about 180 steps
    w, best, gaps = np.zeros(A_all.shape[1]), np.mean((A_all @ w_all - y) ** 2), []
    for _ in range(200):
        w = w - 0.1 * 2 / len(y) * A_all.T @ (A_all @ w - y)
        gaps.append(np.mean((A_all @ w - y) ** 2) - best)
    assert gaps[150] > 1e-6 and abs(gaps[190]) < 1e-6


def test_chapter_figures_from_the_build(book_build):
    """The figures chapter 1 states: test RMSE and R^2 of each model (80/20 split, seed 0)."""
    fig = book_figures("01-regression")
    assert fig["ch1_test_rmse_all"] == pytest.approx(15_150, rel=0.02)  # "about 15,000 dollars"
    assert fig["ch1_test_r2_all"] == pytest.approx(0.734, abs=0.02)  # "about three quarters"
    assert fig["ch1_test_rmse_lotsize"] == pytest.approx(22_600, rel=0.02)
    assert fig["ch1_test_r2_lotsize"] == pytest.approx(0.41, abs=0.02)
    assert fig["ch1_test_rmse_mean"] == pytest.approx(29_800, rel=0.02)
    for name, value in _recomputed_figures().items():  # and an independent recomputation agrees exactly
        assert fig[name] == pytest.approx(value, rel=1e-9), name


def test_chapter_fits_on_all_houses_from_the_build(book_build):
    """The figures of chapter 1's fits on all 546 houses, recomputed with numpy's lstsq."""
    fig = book_figures("01-regression")
    X, y, _ = load_housing()
    rmse = lambda A, w: float(np.sqrt(np.mean((A @ w - y) ** 2)))
    ones = np.ones((len(y), 1))
    A_lot, A_all = np.hstack([ones, X[:, :1]]), np.hstack([ones, (X - X.mean(0)) / X.std(0)])
    w_lot, w_all = (np.linalg.lstsq(A, y, rcond=None)[0] for A in (A_lot, A_all))
    expected = {"ch1_mean_price": y.mean(), "ch1_rmse_guess": float(np.std(y)), "ch1_lot_intercept": w_lot[0],
                "ch1_lot_slope": w_lot[1], "ch1_rmse_lot": rmse(A_lot, w_lot), "ch1_rmse_all_fit": rmse(A_all, w_all),
                "ch1_best_loss": rmse(A_all, w_all) ** 2, "ch1_price_p10": np.percentile(y, 10),
                "ch1_price_p90": np.percentile(y, 90), "ch1_n_train": 436}
    for name, value in expected.items():
        assert fig[name] == pytest.approx(value, rel=1e-6), name
    assert 150 < fig["ch1_gd_floor_step"] < 200  # gradient descent reaches float64's floor within its 200 steps
    assert fig["ch1_numpy_speedup"] > 1 and fig["ch1_numpy_speedup_big"] > 1  # timings: only that numpy won


def _recomputed_penalty_figures() -> dict[str, float]:
    """The figures of the chapter's stopping rule and cross-validation, recomputed in numpy from the definitions
    (folds by np.array_split, standardization per round, ridge as an augmented lstsq), not with teenygrad."""
    X, y, names = load_housing()
    figures = {}
    A = np.column_stack([np.ones(len(X)), (X - X.mean(0)) / X.std(0)])
    w_exact = np.linalg.lstsq(A, y, rcond=None)[0]
    grad = lambda w: 2 / len(y) * A.T @ (A @ w - y)  # noqa: E731
    w, steps = np.zeros(A.shape[1]), 0
    while np.linalg.norm(grad(w)) > 1e-6 * np.linalg.norm(grad(np.zeros(A.shape[1]))):
        w, steps = w - 0.1 * grad(w), steps + 1
    figures["ch1_gd_stop_steps"], figures["ch1_gd_stop_error"] = steps, float(np.max(np.abs(w - w_exact)))

    X_train, X_test, y_train, y_test = preprocessing.train_test_split(X, y, test_fraction=0.2, seed=0)

    def ridge_raw(Xr, b, lam):  # standardize Xr's columns, ridge without penalising the bias, raw weights back
        mu, sd = Xr.mean(0), Xr.std(0)
        Z = np.column_stack([np.ones(len(Xr)), (Xr - mu) / sd])
        D = np.sqrt(len(b) * lam) * np.eye(Z.shape[1])[1:]
        w = np.linalg.lstsq(np.vstack([Z, D]), np.concatenate([b, np.zeros(len(D))]), rcond=None)[0]
        return np.concatenate([[w[0] - np.sum(w[1:] * mu / sd)], w[1:] / sd])

    lams = np.geomspace(1e-4, 1.0, 13)
    folds = np.array_split(np.random.default_rng(0).permutation(len(y_train)), 5)
    scores = np.zeros((len(lams), 5))
    for i, lam in enumerate(lams):
        for f, test in enumerate(folds):
            train = np.concatenate([g for j, g in enumerate(folds) if j != f])
            v = ridge_raw(X_train[train], y_train[train], lam)
            scores[i, f] = np.sqrt(np.mean((v[0] + X_train[test] @ v[1:] - y_train[test]) ** 2))
    mean, error = scores.mean(1), scores.std(1, ddof=1) / np.sqrt(5)
    best = int(np.argmin(mean))
    chosen = float(lams[mean <= mean[best] + error[best]].max())
    figures.update(ch1_cv_lambda=chosen, ch1_cv_best_lambda=float(lams[best]), ch1_cv_error=float(error[best]))
    v_ridge, v_ls = ridge_raw(X_train, y_train, chosen), ridge_raw(X_train, y_train, 0.0)
    figures["ch1_test_rmse_ridge"] = float(np.sqrt(np.mean((v_ridge[0] + X_test @ v_ridge[1:] - y_test) ** 2)))
    figures["ch1_bathroom_dollars"] = float(v_ls[1 + names.index("bathrms")])
    figures["_lot_dollars"] = float(v_ls[1])
    figures["_shrunk"] = float(np.linalg.norm(v_ridge[1:] * X_train.std(0)) / np.linalg.norm(v_ls[1:] * X_train.std(0)))
    figures["_some_grew"] = float(np.any(np.abs(v_ridge[1:]) > np.abs(v_ls[1:])))
    return figures


def test_penalty_figures_stated_in_the_prose():
    fig = _recomputed_penalty_figures()
    assert 0 < fig["ch1_gd_stop_steps"] < 200 and fig["ch1_gd_stop_error"] < 1  # "within ... dollars": weights in thousands
    assert fig["ch1_cv_lambda"] > fig["ch1_cv_best_lambda"]  # "the rule moves right"
    # "the ridge model misses by ... against ... for least squares": the penalty did not pay on the test set
    assert fig["ch1_test_rmse_ridge"] > _recomputed_figures()["ch1_test_rmse_all"]
    assert fig["_shrunk"] < 1 and fig["_some_grew"]  # "shrinks the weights as a whole ... though not every single one"
    assert 1 < fig["_lot_dollars"] < 10  # "a square foot of lot a few dollars"


def test_chapter_penalty_figures_from_the_build(book_build):
    fig = book_figures("01-regression")
    for name, value in _recomputed_penalty_figures().items():
        if not name.startswith("_"):
            assert fig[name] == pytest.approx(value, rel=1e-6, abs=1e-9), name
