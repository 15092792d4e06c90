"""Grade one submission that sits in an nbgrader course directory.

nbgrader does the bookkeeping: it restores the locked and hidden test cells from the gradebook, runs the
notebook, records scores and writes feedback. Between its autograde and feedback steps we replace each
test cell's score by the judge's verdict on what the learner's code computed (see autograder/judges), so
a notebook that hides its errors or patches assert still scores only what it computed right.
"""
from __future__ import annotations

import os
import secrets
import shutil
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path

import nbformat

from autograder import course, judges
from teenygrad.grading import GRADING_DIR_ENV


@dataclass
class PartResult:
    name: str
    score: float
    max_score: float
    message: str = ""


@dataclass
class Result:
    assignment: str
    student: str
    parts: list[PartResult] = field(default_factory=list)
    error: str = ""  # set when the notebook could not be graded at all
    feedback: str = ""  # path of the feedback HTML

    @property
    def score(self) -> float:
        return sum(p.score for p in self.parts)

    @property
    def max_score(self) -> float:
        return sum(p.max_score for p in self.parts)

    def to_json(self) -> dict:
        return {"assignment": self.assignment, "student": self.student, "score": self.score,
                "max_score": self.max_score, "parts": [asdict(p) for p in self.parts],
                "error": self.error, "feedback": self.feedback}


def _test_cells(nb: nbformat.NotebookNode) -> list[tuple[str, float, nbformat.NotebookNode]]:
    """(grade_id, points, cell) of every graded test cell, in notebook order."""
    cells = []
    for cell in nb.cells:
        meta = cell.metadata.get("nbgrader", {})
        if meta.get("grade") and not meta.get("solution"):
            cells.append((meta["grade_id"], float(meta.get("points", 0)), cell))
    return cells


def _error_of(cell: nbformat.NotebookNode) -> str:
    for out in cell.get("outputs", []):
        if out.get("output_type") == "error":
            if out.get("ename") == "NotImplementedError" and not str(out.get("evalue", "")).strip():
                return "NotImplementedError: not done yet (replace `raise NotImplementedError()` with your code)"
            value = str(out.get("evalue", "")).strip().splitlines()
            return f"{out.get('ename', 'Error')}: {value[0][:300]}" if value and value[0] else str(out.get("ename", "Error"))
    return ""


def part_name(grade_id: str) -> str:
    return grade_id.removeprefix("test_")


def autograde(root: Path, assignment: str, student: str, db_url: str | None = None) -> Result:
    """Autograde `submitted/<student>/<assignment>/` in the course at `root`, judge it, write feedback."""
    result = Result(assignment, student)
    parts = judges.load(assignment)
    source_nb = nbformat.read(course.SOLUTIONS / f"{assignment}.ipynb", as_version=4)
    api = course.api(root, db_url)
    with tempfile.TemporaryDirectory(prefix="teenygrad-grading-") as tmp:
        grading_dir = Path(tmp)
        drawn = judges.write_cases(parts, grading_dir, seed=secrets.randbits(63))
        previous = os.environ.get(GRADING_DIR_ENV)
        os.environ[GRADING_DIR_ENV] = str(grading_dir)  # the kernel inherits it
        try:
            run = api.autograde(assignment, student)
        finally:
            if previous is None:
                os.environ.pop(GRADING_DIR_ENV, None)
            else:
                os.environ[GRADING_DIR_ENV] = previous
        verdicts = judges.judge(parts, drawn, grading_dir)

    graded_path = root / "autograded" / student / assignment / f"{assignment}.ipynb"
    if not run["success"] or not graded_path.exists():
        log = (run.get("log", "") + run.get("error", "")).strip().splitlines()
        result.error = "the notebook could not be run: " + (log[-1] if log else "nbgrader autograde failed")
        result.parts = [PartResult(part_name(g), 0.0, p, result.error) for g, p, _ in _test_cells(source_nb)]
        return result

    graded = nbformat.read(graded_path, as_version=4)
    from nbgrader.api import Gradebook

    with Gradebook(api.coursedir.db_url) as gb:
        for grade_id, points, cell in _test_cells(graded):
            name = part_name(grade_id)
            error = _error_of(cell)
            if name in parts:
                verdict = verdicts[name]
                score = points if verdict is None else 0.0
                message = "" if verdict is None else (error or verdict)
            else:  # a test cell without a judge: nbgrader's own verdict (no error = full points)
                score, message = (0.0, error) if error else (points, "")
            grade = gb.find_grade(grade_id, assignment, assignment, student)
            grade.auto_score = score
            result.parts.append(PartResult(name, score, points, message))
            if message:  # say why in the feedback, right under the test cell
                cell.outputs.append(nbformat.v4.new_output("stream", name="stderr",
                                                           text=f"Autograder: 0 of {points:g} points. {message}\n"))
        gb.db.commit()
    nbformat.write(graded, graded_path)

    fb = api.generate_feedback(assignment, student)
    html = root / "feedback" / student / assignment / f"{assignment}.html"
    if fb["success"] and html.exists():
        result.feedback = str(html)
    return result


def check_notebook(nb: nbformat.NotebookNode, assignment: str, feedback_to: Path | None,
                   student: str = "learner") -> Result:
    """Grade one learner's notebook in a fresh, throw-away course directory."""
    with tempfile.TemporaryDirectory(prefix="teenygrad-course-") as tmp:
        root = Path(tmp)
        course.generate(root, assignment)
        sub = root / "submitted" / student / assignment
        sub.mkdir(parents=True)
        nbformat.write(nb, sub / f"{assignment}.ipynb")
        result = autograde(root, assignment, student)
        if result.feedback and feedback_to is not None:
            feedback_to.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(result.feedback, feedback_to)
            result.feedback = str(feedback_to)
        else:
            result.feedback = ""
        return result
