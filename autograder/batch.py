"""Grade every submission of an assignment in a course, in parallel, resumably."""
from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import signal
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path

import nbformat
from tqdm import tqdm

from autograder import course, gradebook, warm, worker, workers
from autograder.autograde import Limits, PartResult, Result, part_name, test_cells


def submissions(root: Path, assignment: str) -> dict[str, Path]:
    return {p.parent.parent.name: p for p in sorted((root / "submitted").glob(f"*/{assignment}/{assignment}.ipynb"))}


def _digest(notebook: Path) -> str:
    """The submission's sha256, or "" when it is not a regular file (the worker could not have read it either)."""
    return hashlib.sha256(notebook.read_bytes()).hexdigest() if notebook.is_file() else ""


def _last_line(job_dir: Path) -> str:
    """The last line a failed worker wrote (its log may be long: only its end is read)."""
    with open(job_dir / "worker.log", "rb") as log:
        log.seek(max(0, log.seek(0, os.SEEK_END) - 4096))
        return (log.read().decode(errors="replace").strip().splitlines() or [""])[-1][:300]


def _grade_one(template: Path, assignment: str, student: str, notebook: Path, limits: Limits,
               scratch: Path, numba_cache: Path | None = None, edition: Path | None = None) -> tuple[Result, Path]:
    """Run the worker for one submission; a worker that crashes or hangs becomes a recorded outcome."""
    job_dir = scratch / student
    keep = job_dir / "keep"
    job_dir.mkdir(parents=True)
    job = {"template": str(template), "assignment": assignment, "student": student, "notebook": str(notebook),
           "keep": str(keep), "limits": dataclasses.asdict(limits),
           "numba_cache": str(numba_cache) if numba_cache else None, "edition": str(edition) if edition else None}
    (job_dir / "job.json").write_text(json.dumps(job))
    proc = workers.WORKERS.Process(target=worker.forked, args=(str(job_dir / "job.json"), str(job_dir / "worker.log")))
    proc.start()
    proc.join(timeout=limits.wall_seconds + 300)
    if proc.exitcode is None:
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # the worker and its process group
        except ProcessLookupError:  # it had not made its process group yet
            proc.kill()
        proc.join()
        problem = "the grader did not finish in time"
    else:
        problem = "" if proc.exitcode == 0 else f"the grader failed (exit {proc.exitcode}): " + _last_line(job_dir)
    if not problem and (job_dir / "result.json").exists():
        return Result.from_json(json.loads((job_dir / "result.json").read_text())), keep / f"{assignment}.ipynb"
    source = nbformat.read(template / "source" / assignment / f"{assignment}.ipynb", as_version=4)
    result = Result(assignment, student, error=problem or "the grader wrote no result",
                    parts=[PartResult(part_name(g), 0.0, p, problem) for g, p, _ in test_cells(source)],
                    sha256=_digest(notebook))
    keep.mkdir(parents=True, exist_ok=True)
    nbformat.write(source, keep / f"{assignment}.ipynb")
    return result, keep / f"{assignment}.ipynb"


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
        workers.start()  # its imports run beside the preparations below
    with tempfile.TemporaryDirectory(prefix="teenygrad-batch-") as tmp:
        scratch = Path(tmp)
        template = course.template(assignment)  # copied into a private course per submission
        numba_cache = warm.numba_cache(log=lambda m: print(m, file=sys.stderr)) if todo else None
        edition = warm.learner_edition(assignment) if todo else None  # the exercise's pieces are stubs there
        with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool, \
                tqdm(total=len(todo), unit="notebook", disable=not progress or not todo, file=sys.stderr) as bar:
            futures = {pool.submit(_grade_one, template, assignment, s, nb, limits, scratch / "jobs", numba_cache,
                                   edition): s
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
