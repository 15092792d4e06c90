"""Each assignment's released exercise and two half-solved notebooks, graded as a class (`collect`, then
`grade`, as an instructor would): the exercise scores zero cleanly; in a half-solved notebook each solved part
earns its points alone, and an answer pasted from the package earns nothing. The two halves solve every part
between them, each with the solutions notebook's code, so together they are the solution graded part by part:
it scores full marks (grading the solutions notebook itself as well ran every part a second time, for nothing
the halves do not show). Every assignment's notebooks go into one course, graded by one `grade` of all the
assignments, so the grader starts once. A learner's `check` of a whole solutions notebook, with its feedback
page, is tested in tests/test_autograder.py. (A file of its own, so that the suite's two workers can share the
gradings with tests/test_autograder.py: `--dist loadfile` keeps each file on one worker.)"""
from __future__ import annotations

import json
from pathlib import Path

import nbformat
import pytest

from autograder import course

from conftest import autograder

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


def half_solved(assignment: str, parity: int) -> tuple[nbformat.NotebookNode, set[str]]:
    """The exercise with every other part solved (from `parity`) and the rest pasted; the solved parts."""
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
    return nb, chosen


@pytest.fixture(scope="module")
def graded_class(tmp_path_factory, request):
    """graded_class(assignment) -> {learner: result.json}: "released", "half-0" and "half-1" of every assignment
    this run's tests ask for (all of them, or those `-k` selects), collected into one course and graded by one
    `grade` of those assignments, on first use."""
    root, src = tmp_path_factory.mktemp("course"), tmp_path_factory.mktemp("submissions")
    learners = ("released", "half-0", "half-1")
    wanted = {item.callspec.params["assignment"] for item in request.session.items
              if item.path == request.path and hasattr(item, "callspec")}
    chosen = [a for a in ASSIGNMENTS if a in wanted]
    for assignment in chosen:
        notebooks = {"released": nbformat.read(course.EXERCISES / f"{assignment}.ipynb", as_version=4),
                     **{f"half-{p}": half_solved(assignment, p)[0] for p in (0, 1)}}
        for learner, nb in notebooks.items():
            (src / assignment / learner).mkdir(parents=True)
            nbformat.write(nb, src / assignment / learner / f"{assignment}.ipynb")
        autograder("collect", str(src / assignment), "-a", assignment, "--course", str(root), check=True)
    autograder("grade", *chosen, "--course", str(root), check=True)
    return lambda assignment: {learner: json.loads((root / "autograded" / learner / assignment / "result.json")
                                                   .read_text()) for learner in learners}


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_solution_scores_full_marks(assignment, graded_class):
    """Every part of the solution, graded in the half that solves it, earns all its points without a message."""
    parts = {}
    for parity in (0, 1):
        _, chosen = half_solved(assignment, parity)
        result = graded_class(assignment)[f"half-{parity}"]
        assert result["max_score"] > 0 and result["error"] == ""
        parts.update({p["name"]: p for p in result["parts"] if p["name"] in chosen})
    assert parts.keys() == {p["name"] for p in graded_class(assignment)["released"]["parts"]}
    assert all(p["score"] == p["max_score"] and p["message"] == "" for p in parts.values()), json.dumps(parts, indent=1)


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_released_exercise_scores_zero_cleanly(assignment, graded_class):
    result = graded_class(assignment)["released"]
    assert result["score"] == 0 and result["error"] == ""
    assert len(result["parts"]) >= 3
    for part in result["parts"]:
        assert part["message"].startswith("NotImplementedError"), part


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
@pytest.mark.parametrize("parity", [0, 1])
def test_partly_solved_gets_exactly_its_parts(assignment, parity, graded_class):
    """Half the parts solved, the other half answered with teenygrad's own piece (tests/pasted/: an import, a
    call through the package's tables, a subclass): the solved parts earn their points, and the pasted ones
    nothing, because grading runs on the learner's edition, where the exercise's pieces are stubs."""
    _, chosen = half_solved(assignment, parity)
    result = graded_class(assignment)[f"half-{parity}"]
    assert result["error"] == "" and len(result["parts"]) >= 3
    # a test cell test_X grades the solution cell X
    for part in result["parts"]:
        expected = part["max_score"] if part["name"] in chosen else 0
        assert part["score"] == expected, (part, chosen)
