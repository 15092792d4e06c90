"""The book builds (warnings are errors, failing cells fail it) and shows what it should.

One build per test session (the `book_build` fixture, as `make book` does it); the chapters' stated figures
are read back from that build's executed notebooks, so the numbers a reader sees are the ones tested.
"""
from __future__ import annotations

import json
import re

import pytest

from conftest import REPO

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
