"""Find the numbers a chapter's prose states literally (not glued), for tests/test_prose_numbers.py.

A figure in the prose must come from the build (a `{glue:text}` role), so that it is true on the machine
that built the book. What the scanner still lets through as literal digits, and why:

* small whole numbers, 0 to 10 ("two vector loads", "4 heads", "chapter 8's bigrams"): counts a reader checks
  by eye, which would be written in words just as well;
* numbers that appear as literals in the chapter's own code cells ("300 steps", "a learning rate of 0.01"):
  the prose restates a setting the reader can see, not a result (a percentage counts if its fraction is in the
  code: "20%" for `test_fraction=0.2`);
* references and list markers: "chapter 4", "Exercise 5", "Step 3", "1. ...".

Neither of the first two applies after a word of approximation ("about 4", "roughly 6.6", "$\\approx 3.30$"):
an approximate number is a measured one. Everything else must be glued or listed, with its reason, in the
allowlist of tests/test_prose_numbers.py. Inline code, code blocks and link targets are not prose; math is.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import nbformat

# not inside a name (float32, x_1, GPT-2, 1e-5), nor an exponent (2^{24}) or its base (10^7): powers are magnitudes
NUMBER = re.compile(r"(?<![\w.\\{^_-])\d+(?:[.,]\d+)*(?![\w^])")
APPROX = re.compile(r"(?:about|roughly|nearly|around|approximately|almost|some|~|\\approx|≈)\s*\$?\s*$", re.I)
REFERENCE = re.compile(r"(?:[Cc]hapters?|Exercises?|Step|Part|[Ll]ayer|[Hh]ead)\s+\d+(?:(?:,\s*|\s+and\s+|\s+or\s+|\s+to\s+)\d+)*")
LIST_MARKER = re.compile(r"^\s*\d+\.\s", re.M)
CODE_LITERAL = re.compile(r"(?<![\w.])\d[\d_]*(?:\.\d+)?(?:e-?\d+)?(?![\w])")


@dataclass(frozen=True)
class Literal:
    chapter: str   # "05-scalar-autograd"
    cell: int      # index of the markdown cell
    text: str      # the number as written: "1,497"
    context: str   # the words around it, for the error message


def value(text: str) -> float:
    return float(text.replace(",", ""))


def prose(source: str) -> str:
    """A markdown cell with what is not prose blanked out (same length, so positions still make sense)."""
    blank = lambda m: " " * len(m.group(0))
    source = re.sub(r"```.*?```", blank, source, flags=re.S)
    source = re.sub(r"\{glue:[a-z]+\}`[^`]*`", blank, source)
    source = re.sub(r"`[^`]*`", blank, source)
    source = re.sub(r"\]\([^)]*\)", blank, source)  # link targets: ../exercises/05-scalar-autograd.ipynb
    for pattern in (REFERENCE, LIST_MARKER):
        source = pattern.sub(blank, source)
    return source


def code_literals(nb: nbformat.NotebookNode) -> set[float]:
    found = set()
    for cell in nb.cells:
        if cell.cell_type == "code":
            for text in CODE_LITERAL.findall(cell.source):
                found.add(float(text.replace("_", "")))
    return found


def literals(path: Path) -> list[Literal]:
    """Every number in the chapter's prose that the rules above do not let through."""
    nb = nbformat.read(path, as_version=4)
    in_code = code_literals(nb)
    out = []
    for i, cell in enumerate(nb.cells):
        if cell.cell_type != "markdown":
            continue
        text = prose(cell.source)
        for m in NUMBER.finditer(text):
            number, before = m.group(0), text[max(0, m.start() - 20):m.start()]
            approximate = bool(APPROX.search(before))
            x = value(number) if number.count(",") == 0 or re.fullmatch(r"\d{1,3}(,\d{3})+", number) else None
            if x is not None and not approximate:
                percent = text[m.end():m.end() + 1] == "%"
                if (x == int(x) and x <= 10) or x in in_code or (percent and x / 100 in in_code):
                    continue
            context = " ".join(cell.source[max(0, m.start() - 50):m.end() + 30].split())
            out.append(Literal(path.stem, i, number, context))
    return out
