"""The prose says only what is true: numbers come from the build, and the intro's table matches the exercises.

Runs on the committed notebooks, without executing anything (the glued figures themselves are asserted by each
chapter's tests, against the build).
"""
from __future__ import annotations

import re

import nbformat
import pytest

from conftest import REPO
from prose_numbers import literals

CHAPTERS = sorted((REPO / "chapters").glob("[0-9][0-9]-*.ipynb"))
SOLUTIONS = sorted((REPO / "solutions").glob("[0-9][0-9]-*.ipynb"))

# Literal numbers the prose may state, per chapter: {number as written: why it is not a figure to measure}.
# Everything else in a chapter's prose that is not a small count, a setting from its code or a reference must be
# glued from the build (see tests/prose_numbers.py for the rules).
DATA = "a fact of the data set, in teenygrad/data/DATA.md"
ALLOWED: dict[str, dict[str, str]] = {
    "01-regression": {
        "546": DATA, "1987": DATA,
        "6,000": "an example weight, to show that raw weights are not comparable",
        "16": "the significant digits of a float64 (IEEE 754)",
        "80": "the 80/20 split of test_fraction=0.2, written as a ratio",
    },
    "03-kernels": {},
    "04-classification": {
        "3,000": DATA, "1,797": DATA, "16": DATA + " (gray levels 0 to 16)", "64": DATA + " (8x8 pixels)",
        "2999": "the last sentence number of the 3,000 (0-based)",
        "0.69": "ln 2, the loss of a coin toss", "2.30": "ln 10, the loss of a uniform guess among ten digits",
        "3.4": "the largest float32, 3.4e38 (IEEE 754)",
        "80": "the 80/20 split of test_fraction=0.2, written as a ratio",
        "360": "the size of the test split: 20% of 1,797 digits",
    },
    "05-scalar-autograd": {},
    "06-tensor-autograd": {
        "6.4": "(1000 x 10) x (1000 x 64) entries of the Jacobian, the arithmetic of the sentence",
        "7": "the significant digits of a float32 (IEEE 754)", "16": "the significant digits of a float64",
        "4": "7 digits less the 3 that a step of 1e-3 costs", "10": "16 digits less the 6 that a step of 1e-6 costs",
        "80": "the 80/20 split of chapter 1", "20": "the 80/20 split of chapter 1",
    },
    "07-neural-nets": {
        "80": "the 80/20 split of chapter 1",
        "2.30": "ln 10, the loss of a uniform guess among ten classes",
        "0.08": "sqrt(64) x 0.01, the arithmetic of the sentence",
        "0.06": "1 - tanh(0.97 x ...)^2: the slope of tanh beyond +-0.97, from its formula",
        "360": "the size of the test split: 20% of 1,797 digits",
        "98": "the chapter's goal, asserted against the build in tests/test_ch07_neural_nets.py",
        "96.4": "chapter 6's glued test accuracy, recomputed and asserted to be 96.4% in tests/test_ch06_tensor_autograd.py",
        "0": "the loss a sanity check must reach when memorising a few images: a target, not a measurement",
    },
    "08-language-models": {
        "32,257": DATA, "2003": "the year of Bengio et al.'s paper (a citation)",
        "3.30": "ln 27, the loss of a uniform guess among 27 symbols",
        "1": "the spread the initialisation aims for (a design choice, not a measurement)",
        "32,033": "cited: the names in makemore's names.txt (Karpathy, nn-zero-to-hero)",
        "2.17": "cited: Karpathy's makemore part 2 validation loss", "2.10": "cited: makemore part 3",
        "2.45": "cited: makemore part 1's add-one bigram counts, averaged over its 32,033 names",
        "2.48": "cited: makemore part 1's one-layer net, trained towards the bigram table",
        "80": "the 80/10/10 split of the chapter's code (fractions 0.8, 0.1, 0.1), written as a ratio",
        "0.8": "the first of text.split's default fractions (0.8, 0.1, 0.1), stated with its contract: a setting",
    },
    "09-gpt": {
        "80": "the 80/10/10 split of chapter 8, written as a ratio",
        "3.30": "ln 27, the loss of a uniform guess among 27 symbols",
        "1.16": DATA + " (1,158,233 characters)",
        "65": "CONTEXT + 1: a window holds the inputs and, shifted by one, the targets",
        "1.88": "cited: nanoGPT's README",
    },
    "10-compiler": {
        "88": "the guard of the generated float32 exp (codegen/expr.py), below the top of float32 exp's range",
        "88.72": "the top of float32 exp's range, ln(3.4e38): where e^x passes float32's largest value",
    },
    "11-gpu-kernels": {
        "12": "two float32 loads and a store, 3 x 4 bytes: the arithmetic of the sentence",
        "65535": "CUDA's limit on a grid's y and z (NVIDIA's CUDA C++ programming guide), a fact of the hardware",
    },
}


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_numbers_in_the_prose_are_glued(path):
    allowed = ALLOWED.get(path.stem, {})
    stray = [f"cell {x.cell}: {x.text!r} in ...{x.context}..." for x in literals(path) if x.text not in allowed]
    assert not stray, ("numbers typed into the prose; glue them from the build (myst_nb.glue) or, for a constant, "
                       "add them with a reason to ALLOWED in tests/test_prose.py:\n  " + "\n  ".join(stray))


def test_every_allowed_number_is_still_used():
    """An entry whose number left the prose goes too, so the allowlist stays the list of what is there."""
    for path in CHAPTERS:
        prose = "".join(c.source for c in nbformat.read(path, as_version=4).cells if c.cell_type == "markdown")
        for number in ALLOWED.get(path.stem, {}):
            assert re.search(rf"(?<![\d,.]){re.escape(number)}(?![\d])", prose), (path.stem, number)


def test_the_scanner_catches_a_typed_figure(tmp_path):
    """The rules themselves: a measured-looking number is caught; a glued one, a setting from the code, a small
    count and a chapter reference are not."""
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("steps = 300\nglue('loss', loss)"),
                nbformat.v4.new_markdown_cell("After 300 steps (chapter 12) the 4 heads reach {glue:text}`loss:.3f`, "
                                              "about 2.45 per symbol on 1,497 images, roughly 6 times faster; "
                                              "`x = 123` and [Exercise 5](../exercises/05-x.ipynb).")]
    path = tmp_path / "99-example.ipynb"
    nbformat.write(nb, path)
    assert [x.text for x in literals(path)] == ["2.45", "1,497", "6"]


# --- the intro's table -------------------------------------------------------------------------------------------

STOP = {"from", "with", "than", "that", "into", "their", "teenygrad"}


def _table_rows() -> dict[int, str]:
    """The intro's "you build" cells, by chapter number."""
    rows = {}
    for line in (REPO / "book" / "intro.md").read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 3 and re.match(r"\d+\. ", cells[0]):
            rows[int(cells[0].split(".")[0])] = cells[1].lower()
    return rows


def _parts(path) -> list[str]:
    text = "\n".join(c.source for c in nbformat.read(path, as_version=4).cells if c.cell_type == "markdown")
    return re.findall(r"^## Part \d+: (.+?) \(\d+ points?\)", text, re.M)


def test_intro_table_lists_what_each_exercise_asks():
    """Every part of every exercise shows up in its chapter's "you build" cell: at least one of its title's
    words (by their first five letters, so "predictions" matches "prediction")."""
    rows = _table_rows()
    assert sorted(rows) == [int(p.stem[:2]) for p in SOLUTIONS]
    for path in SOLUTIONS:
        cell, parts = rows[int(path.stem[:2])], _parts(path)
        assert parts, path.stem
        for title in parts:
            words = [w for w in re.findall(r"[a-z]+", title.lower()) if len(w) >= 4 and w not in STOP]
            assert any(w[:5] in cell for w in words), f"intro.md, chapter {path.stem}: {title!r} is not in {cell!r}"
