"""Grade one submission: nbgrader's autograde in a private course, the kernel in a sandbox, the judge outside.

`grade` is the one way in (`autograder.batch` calls it for every submission, `check` through the batch). It
grades in a process of its own, forked from the fork server (`autograder.fork_server`), so that whatever happens
to one submission, even a crash of nbgrader itself, costs only that submission: a grading process that fails or
runs past its time becomes a result whose parts score zero, with the reason.

nbgrader does the bookkeeping: it restores the locked and hidden test cells from its gradebook, runs the
notebook and records what happened. Three things are ours:

1. The kernel runs in `autograder.sandbox` (nbgrader starts it from a kernelspec we write), with limits.
2. Hidden tests only *report* outputs (teenygrad.grading.report); the judge compares them with its reference
   here, in the trusted process, and that verdict is the score of each test cell. A part that must also be
   fast is timed here too, never in the notebook (autograder.speed).
3. Grading happens in a private, throw-away course directory. The caller copies the outcome into the real
   course (autograder.gradebook.record), so a submission never touches the real gradebook.
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import os
import resource
import secrets
import shutil
import tempfile
import warnings
from dataclasses import dataclass
from pathlib import Path

import nbformat

from autograder import course, fork_server, judges, sandbox, speed, traffic
from autograder.normalize import cap_outputs, normalize
from autograder.notebooks import BadNotebookError, read_notebook
from autograder.results import PartResult, Result, part_name, test_cells
from autograder.sandbox import Limits
from teenygrad.edition import WITHHOLD_ENV
from teenygrad.grading import GRADING_DIR_ENV

MEMORY_BYTES = 8 * 2**30  # the grading process's own address space (a flood of output is held there)
GRACE_SECONDS = 300  # how long past the notebook's wall clock the grading process may take before it is killed


@dataclass(frozen=True)
class Job:
    """One submission to grade: `notebook`, handed in by `student` for `assignment` of the course `template`."""

    template: Path  # a course with the assignment's source and release (course.template)
    assignment: str
    student: str
    notebook: Path
    limits: Limits
    numba_cache: Path | None = None  # the warm cache each sandbox starts from a copy of (caches.numba_cache)
    edition: Path | None = None  # the learner's edition bound in place of teenygrad (caches.learner_edition)

    def source(self) -> nbformat.NotebookNode:
        return nbformat.read(self.template / "source" / self.assignment / f"{self.assignment}.ipynb", as_version=4)


def grade(job: Job, scratch: Path) -> tuple[Result, Path]:
    """Grade `job` in a process of its own (its files in `scratch`/<student>); (the result, the graded notebook)."""
    folder = scratch / job.student
    keep = folder / "keep"
    folder.mkdir(parents=True)
    log = folder / "grader.log"
    exit_code = fork_server.run(_grade_here, (job, folder), str(log), job.limits.wall_seconds + GRACE_SECONDS)
    if exit_code is None:
        problem = "the grader did not finish in time"
    else:
        problem = "" if exit_code == 0 else f"the grader failed (exit {exit_code}): " + _last_line(log)
    if not problem and (folder / "result.json").exists():
        result = Result.from_json(json.loads((folder / "result.json").read_text()))
    else:
        result = _not_graded(job, keep, problem or "the grader wrote no result")
        result.sha256 = _digest(job.notebook)
    return result, keep / f"{job.assignment}.ipynb"


def _digest(notebook: Path) -> str:
    """The submission's sha256, or "" when it is not a regular file (the grader could not have read it either)."""
    return hashlib.sha256(notebook.read_bytes()).hexdigest() if notebook.is_file() else ""


def _last_line(log: Path) -> str:
    """The last line a failed grading process wrote (its log may be long: only its end is read)."""
    with open(log, "rb") as f:
        f.seek(max(0, f.seek(0, os.SEEK_END) - 4096))
        return (f.read().decode(errors="replace").strip().splitlines() or [""])[-1][:300]


def _not_graded(job: Job, keep: Path, why: str, note: str = "") -> Result:
    """Every part zero with `why`; the assignment's notebook (with `note` on top) kept for the feedback page."""
    source = job.source()
    result = Result(job.assignment, job.student, error=why,
                    parts=[PartResult(part_name(g), 0.0, p, why) for g, p, _ in test_cells(source)])
    if note:
        source.cells.insert(0, nbformat.v4.new_markdown_cell(note))
    keep.mkdir(parents=True, exist_ok=True)
    nbformat.write(source, keep / f"{job.assignment}.ipynb")
    return result


def _grade_here(job: Job, folder: Path) -> None:
    """In the forked grading process: grade, and write result.json into `folder`."""
    warnings.filterwarnings("ignore")
    # defence in depth: a flood of output is held in this process's memory; let it fail here, not the batch
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_BYTES, MEMORY_BYTES))
    sandbox.private_mounts()  # the sandbox's tmpfs work folder is mounted here and vanishes with this process
    keep = folder / "keep"
    sha = hashlib.sha256(job.notebook.read_bytes()).hexdigest()
    try:
        nb = read_notebook(job.notebook)  # not JSON, empty, nbformat 3 (converted), ...
        found = nb.metadata.get("teenygrad", {}).get("assignment")
        if isinstance(found, str) and found != job.assignment:
            raise BadNotebookError(f"this notebook is assignment {found}, not {job.assignment}")
        result = _grade_in_private_course(job, nb, keep)
    except BadNotebookError as e:
        reason = str(e).replace(f"{job.notebook}: ", "")
        result = _not_graded(job, keep, f"not graded: {reason}",
                             note=f"**Autograder:** this submission could not be graded: {reason}.")
    result.sha256 = sha
    (folder / "result.json").write_text(json.dumps(result.to_json()))


def _grade_in_private_course(job: Job, nb: nbformat.NotebookNode, keep: Path) -> Result:
    """Grade `nb` as the student's submission; leave the autograded notebook in `keep`.

    The notebook runs on the learner's edition of teenygrad: the pieces of the assignment are stubs (bound in
    from `job.edition` when the sandbox can mount, withheld by TEENYGRAD_WITHHOLD in any case), so the package's
    own answer can't be imported, subclassed or captured; only the learner's installed functions run there."""
    result = Result(job.assignment, job.student)
    source = job.source()
    parts = judges.load(job.assignment)
    # (the mounts are undone before the folder holding them is removed)
    with tempfile.TemporaryDirectory(prefix="teenygrad-private-") as tmp, contextlib.ExitStack() as mounts:
        private = Path(tmp)
        submitted, fixed = _private_course(job, nb, source, private, result)
        box, drawn = _kernel_sandbox(job, parts, private, mounts, result)
        run = _autograde(job, private, box, result)
        verdicts = judges.judge(parts, drawn, box.work / "grading")
        _time_speed_parts(job, fixed, parts, verdicts, private, mounts)
        status = box.status()
        if status.get("disk_full") and status.get("outcome") != "disk":
            result.notes.append(f"the notebook filled the {_gib(job.limits.disk_bytes)} of disk space it may use; "
                                "writes past that failed")
        result.isolation = status.get("isolation", "")
        graded_path = private / "course" / "autograded" / job.student / job.assignment / f"{job.assignment}.ipynb"
        graded = nbformat.read(graded_path, as_version=4) if run["success"] and graded_path.exists() else None
        if graded is None:
            result.error = _stopped_reason(status, job.limits, run.get("log", "") + run.get("error", ""))
        _score(result, graded, source, parts, verdicts)
        _keep_graded(result, graded, submitted, keep / f"{job.assignment}.ipynb")
        result.seconds = float(status.get("seconds", 0.0))
    return result


def _private_course(job: Job, nb: nbformat.NotebookNode, source: nbformat.NotebookNode, private: Path,
                    result: Result) -> tuple[Path, nbformat.NotebookNode]:
    """A copy of the course holding only this submission, put back into the assignment's shape (normalize.py);
    (the submission's path there, the normalized notebook)."""
    shutil.copytree(job.template, private / "course")
    folder = private / "course" / "submitted" / job.student / job.assignment
    folder.mkdir(parents=True)
    released = nbformat.read(job.template / "release" / job.assignment / f"{job.assignment}.ipynb", as_version=4)
    fixed, result.notes = normalize(nb, source, released)
    nbformat.write(fixed, folder / f"{job.assignment}.ipynb")
    return folder / f"{job.assignment}.ipynb", fixed


def _kernel_sandbox(job: Job, parts: dict, private: Path, mounts: contextlib.ExitStack,
                    result: Result) -> tuple[sandbox.Box, dict]:
    """The kernel's sandbox, with the hidden tests' cases drawn into its grading folder; (the box, the cases)."""
    box = _sandbox(job, private, mounts, "sandbox", learner=True, kernel=True)
    grading_dir = box.work / "grading"
    drawn = judges.write_cases(parts, grading_dir, seed=secrets.randbits(63))
    box.spec["env"][GRADING_DIR_ENV] = str(grading_dir)
    box.save()
    sandbox.give_to(grading_dir, box.spec["uid"])
    result.sandbox = f"{box.spec['id']}:{box.spec['uid']}"
    return box, drawn


def _sandbox(job: Job, private: Path, mounts: contextlib.ExitStack, name: str, learner: bool,
             kernel: bool = False) -> sandbox.Box:
    """A sandbox for the learner's code (the learner's edition, the exercise withheld), or for the book's own
    (the reference kernel of a speed test); unmounted when `mounts` closes."""
    env = {WITHHOLD_ENV: job.assignment} if learner else {}
    box = sandbox.prepare(private, env, job.limits, str(job.numba_cache) if job.numba_cache else None, name=name,
                          kernel=kernel, edition=str(job.edition) if learner and job.edition else None)
    mounts.callback(sandbox.unmount, box.work)
    mounts.callback(sandbox.unmount, box.work / "grading")
    return box


def _autograde(job: Job, private: Path, box: sandbox.Box, result: Result) -> dict:
    """nbgrader's autograde of the submission, its kernel in `box`; then nothing of the notebook's stays."""
    os.environ["JUPYTER_PATH"] = str(private / "jupyter")
    cfg_extra = {"kernel_name": sandbox.KERNEL_NAME, "ipc": str(box.work / "ipc" / "kernel"),
                 "cell_timeout": job.limits.cell_seconds}
    try:
        return course.api(private / "course", extra=cfg_extra).autograde(job.assignment, job.student)
    finally:
        if sandbox.sweep(box.spec):
            result.notes.append("processes or System V shared memory the notebook left behind were removed")


def _time_speed_parts(job: Job, fixed: nbformat.NotebookNode, parts: dict, verdicts: dict, private: Path,
                      mounts: contextlib.ExitStack) -> None:
    """Time every part that must also be fast, and count the memory traffic of every part whose GPU kernel must
    move little, among the parts passed so far: here, by the grader, never by the notebook."""
    def make_box(name: str) -> sandbox.Box:  # the reference kernel runs on the book's teenygrad
        return _sandbox(job, private, mounts, name, learner=name != "speed-reference")

    for name, part in parts.items():
        if part.traffic is not None and verdicts[name] is None:
            try:
                verdicts[name] = traffic.judge_traffic(fixed, name, part.traffic, make_box("traffic"),
                                                       secrets.randbits(63))
            except RuntimeError as e:
                verdicts[name] = f"not graded: {e}"
        if part.speed is not None and verdicts[name] is None:
            try:
                verdicts[name] = speed.judge_speed(fixed, name, part.speed, make_box, secrets.randbits(63))
            except RuntimeError as e:
                verdicts[name] = f"not graded: {e}"


def _score(result: Result, graded: nbformat.NotebookNode | None, source: nbformat.NotebookNode, parts: dict,
           verdicts: dict) -> None:
    """The points of every test cell (the judge's verdict where the part has a judge), each lost point's reason
    written under its cell in the graded notebook."""
    for grade_id, points, cell in test_cells(graded if graded is not None else source):
        name = part_name(grade_id)
        error = _error_of(cell) if graded is not None else ""
        if name in parts:
            verdict = verdicts[name]
            score = points if verdict is None else 0.0
            message = "" if verdict is None else (error or verdict)
            if verdict is not None and graded is None:
                message = f"{verdict} ({result.error})"
        else:  # a test cell without a judge: nbgrader's own rule, no error means full points
            score, message = (0.0, error or result.error) if (error or graded is None) else (points, "")
        result.parts.append(PartResult(name, score, points, message))
        if graded is not None and message:  # say why in the feedback, right under the test cell
            cell.outputs.append(nbformat.v4.new_output(
                "stream", name="stderr", text=f"Autograder: 0 of {points:g} points. {message}\n"))


def _keep_graded(result: Result, graded: nbformat.NotebookNode | None, submitted: Path, path: Path) -> None:
    """Write the notebook the feedback is made from: the graded one with the grader's notes on top, or, when
    the notebook did not finish, the submission with the reason on top."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if graded is not None and cap_outputs(graded):
        result.notes.append("some outputs were too large and were cut")
    if graded is not None and result.notes:
        graded.cells.insert(0, nbformat.v4.new_markdown_cell("**Autograder notes:** " + "; ".join(result.notes) + "."))
    if graded is None:
        graded = nbformat.read(submitted, as_version=4)
        graded.cells.insert(0, nbformat.v4.new_markdown_cell(f"**Autograder:** {result.error}."))
    nbformat.write(graded, path)


def _error_of(cell: nbformat.NotebookNode) -> str:
    for out in cell.get("outputs", []):
        if out.get("output_type") == "error":
            name, value = str(out.get("ename", "Error")), str(out.get("evalue", "")).strip().splitlines()
            if name == "NotImplementedError" and not value:
                return "NotImplementedError: not done yet (replace `raise NotImplementedError()` with your code)"
            return f"{name}: {value[0][:300]}" if value and value[0] else name
    return ""


def _gib(n: int) -> str:
    return f"{n / 2**30:g} GiB" if n >= 2**30 else f"{n / 2**20:g} MB"


def _stopped_reason(status: dict, limits: Limits, log: str) -> str:
    outcome = status.get("outcome")
    if outcome == "timeout":
        return f"the notebook ran past the {limits.wall_seconds} s limit and was stopped"
    if outcome == "memory":
        return f"the notebook used more than {limits.memory_bytes / 2**30:g} GiB of memory and was stopped"
    if outcome == "disk":
        return f"the notebook wrote more than {_gib(limits.disk_bytes)} into its folder and was stopped"
    if "Timeout waiting for execute reply" in log or "CellTimeoutError" in log:
        return (f"a cell ran past the {limits.cell_seconds} s limit and ignored the interrupt (a loop in compiled "
                "code?), so the notebook was stopped")
    if outcome == "exited":
        return f"the notebook's kernel exited (code {status.get('exit_code')}) before all cells ran"
    last = [line for line in log.strip().splitlines() if line.strip()]
    return "the notebook could not be run" + (f": {last[-1][:200]}" if last else "")
