"""Chapter 1's pieces: teenygrad.preprocessing and teenygrad.regression against oracles, the 01-regression judge against the solutions
notebook, and the figures the chapter's prose states."""
from __future__ import annotations

import math
import statistics
from pathlib import Path

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from autograder.judges import judge, write_cases
from autograder.judges.regression import PARTS
from teenygrad import preprocessing, regression
from teenygrad.datasets import load_housing
from teenygrad.grading import GRADING_DIR_ENV, report

from conftest import book_figures, solution_cells

REPO = Path(__file__).resolve().parent.parent
CHAPTER = REPO / "chapters" / "01-regression.ipynb"
SOLUTIONS = REPO / "solutions" / "01-regression.ipynb"
POINTS = {"ridge_gradient": 2, "fit_ridge": 2, "unstandardize": 2, "kfold_rmse": 2}

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


# --- teenygrad.regression against oracles ---------------------------------------------------------------

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
    w_gd, losses = regression.gradient_descent(X, y, lr, 3000, lam)
    assert np.all(np.diff(losses) <= 1e-12) and np.allclose(w_gd, w, atol=1e-5)


def test_least_squares_pieces_match_numpy():
    rng = np.random.default_rng(3)
    X, y = _design(rng, 40, 5), rng.normal(size=40)
    assert np.allclose(regression.fit_normal_equations(X, y), np.linalg.lstsq(X, y, rcond=None)[0])
    assert np.allclose(regression.fit_ridge(X, y, 0.0), np.linalg.lstsq(X, y, rcond=None)[0])
    assert np.allclose(regression.predict(X, np.ones(5)), X.sum(axis=1))


@pytest.mark.parametrize("seed", range(5))
def test_unstandardize_keeps_every_prediction(seed):
    rng = np.random.default_rng(seed)
    n, d = int(rng.integers(2, 30)), int(rng.integers(1, 8))
    X = rng.normal(loc=rng.uniform(-100, 100, d), scale=rng.uniform(0.1, 30, d), size=(n, d))
    Z, _, mean, std = preprocessing.standardize(X, X[:1])
    w = rng.normal(size=d + 1)
    v = regression.unstandardize(w, mean, std)
    assert np.allclose(np.column_stack([np.ones(n), X]) @ v, np.column_stack([np.ones(n), Z]) @ w)


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


# --- the 01-regression judge against the solutions notebook -----------------------------------------------

def test_solutions_notebook_matches_the_judge():
    solutions, tests = solution_cells(SOLUTIONS)  # the notebook's house rules: tests/test_notebooks.py
    assert set(solutions) == set(tests) == set(PARTS) == set(POINTS)
    for part, (points, hidden) in tests.items():
        assert points == POINTS[part]
        assert f'report("{part}"' in hidden and "assert" not in hidden


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_the_package_passes_the_judge(seed, tmp_path, monkeypatch):
    """The judge's references and the book's pieces agree (the hidden tests call these same functions)."""
    drawn = write_cases(PARTS, tmp_path, seed)
    monkeypatch.setenv(GRADING_DIR_ENV, str(tmp_path))
    report("ridge_gradient", lambda X, y, w, lam, lr: (regression.ridge_gradient(X, y, w, lam),
                                                       regression.gradient_descent(X, y, lr, 25, lam)[0]))
    report("fit_ridge", regression.fit_ridge)
    report("unstandardize", regression.unstandardize)
    report("kfold_rmse", lambda X, y, k, seed: regression.kfold_rmse(
        X, y, k, lambda A, b: np.linalg.lstsq(A, b, rcond=None)[0], seed=seed))
    assert judge(PARTS, drawn, tmp_path) == {part: None for part in PARTS}


def _lstsq(A, b):
    return np.linalg.lstsq(A, b, rcond=None)[0]


WRONG = {  # plausible mistakes the judge must catch
    "ridge_gradient": lambda X, y, w, lam, lr: (2 / len(y) * X.T @ (X @ w - y) + 2 * lam * w,  # penalises the bias
                                                np.zeros(len(w))),
    "fit_ridge": lambda X, y, lam: np.linalg.solve(X.T @ X + lam * np.eye(X.shape[1]), X.T @ y),  # lam, not n lam
    "unstandardize": lambda w, mean, std: np.concatenate([[w[0]], w[1:] / std]),  # forgets to move the bias
    "kfold_rmse": lambda X, y, k, seed: regression.kfold_rmse(X, y, k, _lstsq, seed=seed + 1),  # another shuffle
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
    ridge = [(case[0].shape, case[2]) for case in PARTS["fit_ridge"].cases(rng)]
    assert any(n < d and lam > 0 for (n, d), lam in ridge) and any(lam == 0 for _, lam in ridge)
    assert any(k == len(y) for _, y, k, _ in PARTS["kfold_rmse"].cases(rng))  # leave-one-out


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
