"""Grade every submission of an assignment in a course, in parallel, resumably."""
from __future__ import annotations

import hashlib
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path

from tqdm import tqdm

from autograder import caches, course, fork_server, gradebook
from autograder.grade_submission import Job, grade
from autograder.results import Result
from autograder.sandbox import Limits


def submissions(root: Path, assignment: str) -> dict[str, Path]:
    return {p.parent.parent.name: p for p in sorted((root / "submitted").glob(f"*/{assignment}/{assignment}.ipynb"))}


def grade_all(root: Path, assignment: str, db_url: str | None = None, jobs: int = 1, force: bool = False,
              limits: Limits | None = None, progress: bool = True) -> tuple[list[Result], list[str]]:
    """Grade the course's submissions of `assignment`; return (results, students skipped as already graded)."""
    limits = (limits or Limits()).shared_by(jobs)
    gradebook.ensure_assignment(root, assignment, db_url)
    todo, skipped = {}, []
    for student, nb in submissions(root, assignment).items():
        previous = gradebook.load_result(root, student, assignment)
        if previous and not force and previous.sha256 == hashlib.sha256(nb.read_bytes()).hexdigest():
            skipped.append(student)
        else:
            todo[student] = nb
    results = []
    if todo:
        fork_server.start()  # its imports run beside the preparations below
    with tempfile.TemporaryDirectory(prefix="teenygrad-batch-") as tmp:
        scratch = Path(tmp)
        template = course.template(assignment)  # copied into a private course per submission
        numba_cache = caches.numba_cache(log=lambda m: print(m, file=sys.stderr)) if todo else None
        edition = caches.learner_edition(assignment) if todo else None  # the exercise's pieces are stubs there
        with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool, \
                tqdm(total=len(todo), unit="notebook", disable=not progress or not todo, file=sys.stderr) as bar:
            futures = {pool.submit(grade, Job(template, assignment, s, nb, limits, numba_cache, edition),
                                   scratch / "jobs"): s
                       for s, nb in todo.items()}
            for future in as_completed(futures):
                student = futures[future]
                result, graded = future.result()
                stamp_file = todo[student].parent / "timestamp.txt"
                stamp = stamp_file.read_text().strip() if stamp_file.exists() else gradebook.now_utc()
                gradebook.record(root, db_url, result, graded, stamp)  # only this thread writes the gradebook
                results.append(result)
                bar.set_postfix_str(f"{student}: {result.score:g}/{result.max_score:g}")
                bar.update(1)
    return sorted(results, key=lambda r: r.student), skipped
