"""Every chapter and exercise notebook follows the house rules (CONTRIBUTING.md), checked in one place."""
from __future__ import annotations

import re
from pathlib import Path

import nbformat
import pytest

from conftest import REPO

CHAPTERS = sorted((REPO / "chapters").glob("[0-9][0-9]-*.ipynb"))
SOLUTIONS = sorted((REPO / "solutions").glob("[0-9][0-9]-*.ipynb"))


def check_headings(nb: nbformat.NotebookNode) -> None:
    """One `#` title, then `##`/`###` only, never skipping a level (the book builds with warnings as errors)."""
    level = 1
    for i, cell in enumerate(nb.cells):
        if cell.cell_type != "markdown":
            continue
        for line in cell.source.splitlines():
            heading = re.match(r"(#+) ", line)
            if heading and not (i == 0 and line == cell.source.splitlines()[0]):
                new = len(heading.group(1))
                assert 2 <= new <= level + 1, f"heading level {new} after {level}: {line!r}"
                level = new


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_chapter_follows_the_house_rules(path: Path):
    nb = nbformat.read(path, as_version=4)
    number = int(path.stem[:2])
    assert nb.cells[0].cell_type == "markdown"
    assert nb.cells[0].source.splitlines()[0].startswith(f"# Chapter {number}: ")
    assert nb.metadata["kernelspec"]["name"] == "python3"
    assert all(c.cell_type == "markdown" or c.outputs == [] for c in nb.cells), "commit chapters without outputs"
    check_headings(nb)
    text = "".join(c.source for c in nb.cells)
    assert f"(../exercises/{path.stem}.ipynb)" in text, "link the chapter's exercise"
    assert "../shared" not in text, "load data through teenygrad.datasets"


@pytest.mark.parametrize("path", SOLUTIONS, ids=lambda p: p.stem)
def test_solution_notebook_follows_the_house_rules(path: Path):
    nb = nbformat.read(path, as_version=4)
    assert nb.metadata["teenygrad"]["assignment"] == path.stem
    assert nb.cells[0].source.splitlines()[0].startswith(f"# Exercise {int(path.stem[:2])}: ")
    assert all(c.cell_type == "markdown" or c.outputs == [] for c in nb.cells)
    check_headings(nb)
    ids = [c.metadata["nbgrader"]["grade_id"] for c in nb.cells if "nbgrader" in c.metadata]
    assert len(ids) == len(set(ids)), "grade_ids must be unique"
    tests = [c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade")]
    solutions = {c.metadata["nbgrader"]["grade_id"] for c in nb.cells if c.metadata.get("nbgrader", {}).get("solution")}
    for cell in nb.cells:
        if cell.metadata.get("nbgrader", {}).get("solution"):
            assert "### BEGIN SOLUTION" in cell.source and "### END SOLUTION" in cell.source, cell.source[:80]
    from autograder import judges
    assert {c.metadata["nbgrader"]["grade_id"].removeprefix("test_") for c in tests} == set(judges.load(path.stem)), \
        "every graded test cell has a part in the judge, and every judged part a test cell"
    for cell in tests:
        part = cell.metadata["nbgrader"]["grade_id"].removeprefix("test_")
        assert part in solutions, f"test cell for {part} has no solution cell {part!r}"
        hidden = cell.source.split("### BEGIN HIDDEN TESTS")[-1]
        assert "### BEGIN HIDDEN TESTS" in cell.source and f'report("{part}"' in hidden.replace("'", '"'), \
            f"test_{part}: hidden tests must report part {part!r} to the judge"
        assert "assert" not in hidden, f"test_{part}: hidden tests only report; judging happens outside"


def test_every_chapter_and_exercise_is_in_the_book():
    toc = (REPO / "book" / "_toc.yml").read_text()
    for path in CHAPTERS:
        assert f"chapters/{path.stem}" in toc
    for path in SOLUTIONS:
        assert f"exercises/{path.stem}" in toc
