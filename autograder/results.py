"""What grading one submission gives: the points of each part, with the reasons (`Result`, kept as result.json
beside the graded notebook and in the gradebook), and which cells of a notebook are its graded tests."""
from __future__ import annotations

from dataclasses import asdict, dataclass, field

import nbformat


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
    error: str = ""  # why the notebook stopped early or could not be graded, if it did
    feedback: str = ""  # path of the feedback HTML
    isolation: str = ""
    seconds: float = 0.0
    sha256: str = ""  # of the graded submission, so re-running `grade` can skip it
    notes: list[str] = field(default_factory=list)  # what the grader changed before running it
    sandbox: str = ""  # "<id>:<uid>" of the sandbox it ran in, for audits

    @property
    def score(self) -> float:
        return sum(p.score for p in self.parts)

    @property
    def max_score(self) -> float:
        return sum(p.max_score for p in self.parts)

    def to_json(self) -> dict:
        data = asdict(self)
        data.update(score=self.score, max_score=self.max_score)
        return data

    @classmethod
    def from_json(cls, data: dict) -> Result:
        fields = {k: data[k] for k in ("assignment", "student", "error", "feedback", "isolation", "seconds", "sha256",
                                       "notes", "sandbox") if k in data}
        return cls(parts=[PartResult(**p) for p in data.get("parts", [])], **fields)


def test_cells(nb: nbformat.NotebookNode) -> list[tuple[str, float, nbformat.NotebookNode]]:
    """(grade_id, points, cell) of every graded test cell, in notebook order."""
    cells = []
    for cell in nb.cells:
        meta = cell.metadata.get("nbgrader", {})
        if meta.get("grade") and not meta.get("solution"):
            cells.append((meta["grade_id"], float(meta.get("points", 0)), cell))
    return cells


def part_name(grade_id: str) -> str:
    return grade_id.removeprefix("test_")
