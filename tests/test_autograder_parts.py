"""The autograder end to end on half-solved notebooks: each part earns its points alone, and an answer pasted
from the package earns nothing. (A file of its own, so that the suite's two workers can share the gradings
with tests/test_autograder.py: `--dist loadfile` keeps each file on one worker.)"""
from __future__ import annotations

from pathlib import Path

import nbformat
import pytest

from autograder import course

from conftest import grade_json

ASSIGNMENTS = course.assignments()
PASTED = Path(__file__).resolve().parent / "pasted"


def pasted_answers(assignment: str) -> dict[str, str]:
    """tests/pasted/NN_name.py: every part of the assignment answered with the package's own implementation."""
    namespace: dict = {}
    exec((PASTED / f"{assignment.replace('-', '_')}.py").read_text(), namespace)
    return namespace["ANSWERS"]


def solution_source(cell_source: str) -> str:
    """A solution cell as the learner would write it: the solution without nbgrader's markers."""
    return "\n".join(line for line in cell_source.splitlines()
                     if "### BEGIN SOLUTION" not in line and "### END SOLUTION" not in line)


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
@pytest.mark.parametrize("parity", [0, 1])
def test_partly_solved_gets_exactly_its_parts(assignment, parity, tmp_path):
    """Half the parts solved, the other half answered with teenygrad's own piece (tests/pasted/: an import, a
    call through the package's tables, a subclass): the solved parts earn their points, and the pasted ones
    nothing, because grading runs on the learner's edition, where the exercise's pieces are stubs."""
    solved = nbformat.read(course.SOLUTIONS / f"{assignment}.ipynb", as_version=4)
    answers = {c.metadata["nbgrader"]["grade_id"]: solution_source(c.source) for c in solved.cells
               if c.metadata.get("nbgrader", {}).get("solution")}
    pasted = pasted_answers(assignment)
    assert set(pasted) == set(answers), f"tests/pasted/ must paste an answer for every part of {assignment}"
    nb = nbformat.read(course.EXERCISES / f"{assignment}.ipynb", as_version=4)
    chosen = set(sorted(answers)[parity::2])
    for cell in nb.cells:
        gid = cell.metadata.get("nbgrader", {}).get("grade_id")
        if gid in answers:
            cell.source = answers[gid] if gid in chosen else pasted[gid]
    path = tmp_path / f"{assignment}.ipynb"
    nbformat.write(nb, path)
    result = grade_json(path, feedback=False)  # the page is tested in test_autograder.py
    # a test cell test_X grades the solution cell X
    for part in result["parts"]:
        expected = part["max_score"] if part["name"] in chosen else 0
        assert part["score"] == expected, (part, chosen)
