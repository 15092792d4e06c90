"""The book builds (warnings are errors, failing cells fail it) and shows what it should.

One build per test session (the `book_build` fixture, as `make book` does it); the chapters' stated figures
are read back from that build's executed notebooks, so the numbers a reader sees are the ones tested.
"""
from __future__ import annotations

import json
import re

import pytest

from conftest import REPO, book_figures

HTML = REPO / "book" / "_build" / "html"
EXECUTED = REPO / "book" / "_build" / "jupyter_execute"
CHAPTERS = sorted(p.stem for p in (REPO / "chapters").glob("*.ipynb"))
EXERCISES = sorted(p.stem for p in (REPO / "exercises").glob("*.ipynb"))


def test_book_builds_without_warnings(book_build):
    log = book_build.stdout + book_build.stderr
    assert book_build.returncode == 0, log[-3000:]
    assert not re.search(r"\bWARNING:", log), [line for line in log.splitlines() if "WARNING:" in line]


def test_every_notebook_is_a_page(book_build):
    assert (HTML / "intro.html").exists() and "intro.html" in (HTML / "index.html").read_text()
    for name in CHAPTERS:
        assert (HTML / "chapters" / f"{name}.html").exists(), name
    for name in EXERCISES:
        assert (HTML / "exercises" / f"{name}.html").exists(), name


def test_math_and_plots_render_offline(book_build):
    page = (HTML / "chapters" / "01-regression.html").read_text()
    assert "_static/mathjax/tex-chtml.js" in page and (HTML / "_static" / "mathjax" / "tex-chtml.js").exists()
    assert not re.search(r"https?://[^\"']*mathjax", page), "MathJax must not come from a CDN"
    assert page.count("<img") >= 3  # the chapter's plots
    assert "$$" in page or "math notranslate" in page


@pytest.mark.parametrize("name", CHAPTERS)
def test_each_chapter_links_its_exercise(book_build, name):
    page = (HTML / "chapters" / f"{name}.html").read_text()
    assert f"../exercises/{name}.html" in page


def test_exercises_are_shown_unexecuted(book_build):
    page = (HTML / "exercises" / "01-regression.html").read_text()
    assert "NotImplementedError" in page and "BEGIN HIDDEN TESTS" not in page and "BEGIN SOLUTION" not in page
    copy = json.loads((EXECUTED / "exercises" / "01-regression.ipynb").read_text())  # the download link's copy
    assert not any(cell.get("outputs") for cell in copy["cells"])


def test_chapter1_figures(book_build):
    """The figures chapter 1 states: test RMSE and R^2 of each model (80/20 split, seed 0)."""
    from test_chapter1_pieces import _recomputed_figures

    fig = book_figures("01-regression")
    assert fig["ch1_test_rmse_all"] == pytest.approx(15_150, rel=0.02)  # "about 15,000 dollars"
    assert fig["ch1_test_r2_all"] == pytest.approx(0.734, abs=0.02)  # "about three quarters"
    assert fig["ch1_test_rmse_lotsize"] == pytest.approx(22_600, rel=0.02)
    assert fig["ch1_test_r2_lotsize"] == pytest.approx(0.41, abs=0.02)
    assert fig["ch1_test_rmse_mean"] == pytest.approx(29_800, rel=0.02)
    for name, value in _recomputed_figures().items():  # and an independent recomputation agrees exactly
        assert fig[name] == pytest.approx(value, rel=1e-9), name


def test_chapter1_fits_on_all_houses(book_build):
    """The figures of chapter 1's fits on all 546 houses, recomputed with numpy's lstsq."""
    import numpy as np

    from teenygrad.datasets import load_housing

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


def test_chapter4_sentiment_sizes(book_build):
    """The sentiment model's size and step bound that chapter 4 states, against an independent recomputation."""
    import numpy as np
    from test_chapter4 import _sentiment_features

    fig = book_figures("04-classification")
    _, _, _, X_train, _, y_train, _ = _sentiment_features()
    assert (fig["ch4_sentiment_weights"], fig["ch4_sentiment_train_size"]) == (X_train.shape[1], len(y_train))
    curvature = np.linalg.eigvalsh(X_train.T @ X_train / (4 * len(y_train)))[-1]  # power iteration's target
    assert fig["ch4_sentiment_curvature"] == pytest.approx(curvature, rel=1e-3)
    assert fig["ch4_sentiment_safe_lr"] == pytest.approx(2 / fig["ch4_sentiment_curvature"], rel=1e-9)
