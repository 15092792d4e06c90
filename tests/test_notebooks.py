"""Every chapter and exercise notebook follows the house rules (CONTRIBUTING.md), checked in one place."""
from __future__ import annotations

import io
import keyword
import re
import tokenize
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


# ---- what the learner writes is not on the chapter's page ------------------------------------------------------

SHARED_RUN = 4  # code lines in a row that a solution may not share with its chapter's code cells


def code_line_shapes(source: str) -> list[tuple[str, str]]:
    """(the line, its shape) for each code line of `source`, blank lines, comments, magics and lone strings left
    out; the shape names every identifier N, every number 0 and every string S, so a renamed copy has the same."""
    out = []
    for line in (raw.strip() for raw in source.splitlines()):
        if not line or line.startswith(("#", "%", "!")):
            continue
        try:
            toks = [t for t in tokenize.generate_tokens(io.StringIO(line + "\n").readline) if t.type in CODE_TOKENS]
        except (tokenize.TokenError, SyntaxError):  # a line of a bracket or a string that spans several
            out.append((line, line))
            continue
        if len(toks) == 1 and toks[0].type == tokenize.STRING:
            continue
        shape = " ".join("N" if t.type == tokenize.NAME and not keyword.iskeyword(t.string) else "0" if t.type ==
                         tokenize.NUMBER else "S" if t.type == tokenize.STRING else t.string for t in toks)
        out.append((line, shape))
    return out


CODE_TOKENS = {tokenize.NAME, tokenize.NUMBER, tokenize.STRING, tokenize.OP}


def shared_runs(solution: str, chapter_cells: list[str], run: int = SHARED_RUN) -> list[list[str]]:
    """The runs of `run` code lines of `solution` whose shapes stand in a row in one of the chapter's cells."""
    seen = set()
    for cell in chapter_cells:
        shapes = [s for _, s in code_line_shapes(cell)]
        seen.update(tuple(shapes[i:i + run]) for i in range(len(shapes) - run + 1))
    lines = code_line_shapes(solution)
    return [[line for line, _ in lines[i:i + run]] for i in range(len(lines) - run + 1)
            if tuple(s for _, s in lines[i:i + run]) in seen]


def test_shared_runs_finds_a_renamed_copy_and_nothing_else():
    chapter = ["import math\n\ndef f(x):\n    # why\n    y = math.exp(-x)\n    z = y * 2.0\n    return z + 1\n"]
    renamed = "def g(a):\n    b = math.exp(-a)  # the same steps\n    c = b * 3.5\n    return c + 7\n"
    assert len(shared_runs(renamed, chapter)) == 1
    assert shared_runs("def g(a):\n    b = math.exp(-a)\n    c = b / 3.5\n    return c + 7\n", chapter) == []
    assert shared_runs(renamed, chapter, run=5) == []


@pytest.mark.parametrize("path", SOLUTIONS, ids=lambda p: p.stem)
def test_solutions_do_not_repeat_their_chapter(path: Path):
    """The chapter explains what the exercise asks for and does not write it out: no run of SHARED_RUN code lines
    of a solution (between BEGIN and END SOLUTION) stands in the chapter's code cells, renamed or not."""
    chapter = [c.source for c in nbformat.read(REPO / "chapters" / path.name, as_version=4).cells
               if c.cell_type == "code"]
    for cell in nbformat.read(path, as_version=4).cells:
        if cell.metadata.get("nbgrader", {}).get("solution"):
            for solution in re.findall(r"### BEGIN SOLUTION\n(.*?)### END SOLUTION", cell.source, re.S):
                runs = shared_runs(solution, chapter)
                assert not runs, f"{path.name}: the chapter already writes\n" + "\n".join(runs[0])
