"""Grade one submission: nbgrader's autograde in a private course, the kernel in a sandbox, the judge outside.

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
import json
import os
import secrets
import shutil
import sys
import tempfile
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import nbformat

from autograder import course, judges, sandbox, speed
from autograder.normalize import cap_outputs, normalize
from teenygrad.edition import WITHHOLD_ENV
from teenygrad.grading import GRADING_DIR_ENV

KERNEL_NAME = "teenygrad-sandbox"


def thread_budget() -> int:
    """The threads this grader may use: NUMBA_NUM_THREADS when it was given one, else every core it may run on."""
    given = os.environ.get("NUMBA_NUM_THREADS", "")
    return int(given) if given.isdigit() and int(given) > 0 else len(os.sched_getaffinity(0))


@dataclass
class Limits:
    """What one submission may use. The defaults grade any chapter's exercise comfortably on 2 cores."""

    wall_seconds: int = 900  # the whole notebook, enforced by killing the kernel's process tree
    cell_seconds: int = 300  # one cell, enforced by nbgrader (an interrupt, which pure Python obeys)
    memory_bytes: int = 4 * 2**30
    max_processes: int = 64
    file_bytes: int = 256 * 2**20
    disk_bytes: int = 2**30  # everything the notebook writes into its work folder (HOME, the current folder)
    # numba's and OpenMP's threads in the kernel. Jobs graded at once share the budget (batch.grade_all): two
    # kernels that each thread a loop over every core stall each other, since a parallel loop ends only when
    # its slowest thread does, and a thread that has lost its core waits a whole time slice to get it back
    threads: int = field(default_factory=thread_budget)

    def shared_by(self, jobs: int) -> Limits:
        """These limits for each of `jobs` gradings run at once: the same, but a share of the threads."""
        return replace(self, threads=max(1, self.threads // max(1, jobs)))


GRADING_DIR_BYTES = 128 * 2**20  # the hidden tests' cases and results: a tmpfs of its own, so a notebook
# that fills its work folder is still graded on what it computed

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


def _sandbox(private: Path, grading_env: dict, limits: Limits, numba_cache: str | None = None,
             name: str = "sandbox", kernel: bool = True, edition: str | None = None) -> tuple[Path, Path]:
    """Write the kernelspec and sandbox spec for one submission; return (work folder, status file).

    `edition`: a learner's edition of teenygrad (`warm.learner_edition`), bound in place of the package."""
    root = os.geteuid() == 0
    uid = 100000 + os.getpid() % 50000 if root else os.getuid()  # one uid per worker: no sharing
    box = private / name
    work = box / "work"
    # as root, the work folder is a tmpfs of limits.disk_bytes (in the worker's own mount namespace)
    mounted = sandbox.mount_work(work, limits.disk_bytes, uid) and sandbox.mount_work(
        work / "grading", GRADING_DIR_BYTES, uid)
    for sub in ("home", "ipc", "grading"):
        (work / sub).mkdir(parents=True, exist_ok=True)
    if numba_cache and Path(numba_cache).is_dir():  # a copy: nothing compiled inside leaks to the next one
        shutil.copytree(numba_cache, work / "numba-cache")
    (work / "numba-cache").mkdir(exist_ok=True)
    os.chmod(private, 0o711)
    os.chmod(box, 0o711)
    python_home = str(Path(os.path.realpath(sys.executable)).parent.parent)
    spec = {
        "id": f"{os.getpid()}-{secrets.token_hex(4)}", "uid": uid, "work_dir": str(work), "home": str(work / "home"),
        "read_only": ["/usr", "/lib", "/lib64", "/lib32", "/bin", "/sbin", "/etc", "/sys", python_home, sys.prefix,
                      *([] if edition else [str(course.REPO / "teenygrad")])],
        "read_only_as": [[edition, str(course.REPO / "teenygrad")]] if edition else [],
        "env": {**grading_env, "NUMBA_CACHE_DIR": str(work / "numba-cache"), "MPLBACKEND": "Agg",
                "OMP_NUM_THREADS": str(limits.threads), "NUMBA_NUM_THREADS": str(limits.threads),
                "PYTHONPATH": str(course.REPO),
                "GOMP_SPINCOUNT": "10000"},  # idle OpenMP threads sleep soon: other jobs share the cores (tuning.py)
        "wall_seconds": limits.wall_seconds, "address_space_bytes": limits.memory_bytes,
        "memory_bytes": limits.memory_bytes + 2**29, "max_processes": limits.max_processes,
        "file_bytes": limits.file_bytes, "status_file": str(box / "status.json"),
        "disk_bytes": limits.disk_bytes, "disk_mounted": mounted,
    }
    (box / "spec.json").write_text(json.dumps(spec))
    if kernel:
        kernel_dir = private / "jupyter" / "kernels" / KERNEL_NAME
        kernel_dir.mkdir(parents=True)
        argv = [sys.executable, "-m", "autograder.sandbox", str(box / "spec.json"), "--",
                sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"]
        (kernel_dir / "kernel.json").write_text(json.dumps({"argv": argv, "display_name": "teenygrad sandbox",
                                                            "language": "python"}))
    if root:
        for dirpath, _dirs, files in os.walk(work):
            os.chown(dirpath, uid, uid)
            for f in files:
                os.chown(os.path.join(dirpath, f), uid, uid)
        os.chmod(work, 0o700)
    return work, box / "status.json"


def grade_in_private_course(template: Path, assignment: str, student: str, notebook: Path,
                            limits: Limits, keep: Path, numba_cache: str | None = None,
                            edition: str | None = None) -> Result:
    """Grade `notebook` as `student`'s submission; leave the autograded notebook and result in `keep`.

    The notebook runs on the learner's edition of teenygrad: the pieces of `assignment` are stubs (bound in
    from `edition` when the sandbox can mount, withheld by TEENYGRAD_WITHHOLD in any case), so the package's
    own answer can't be imported, subclassed or captured; only the learner's installed functions run there."""
    result = Result(assignment, student)
    source_nb = nbformat.read(template / "source" / assignment / f"{assignment}.ipynb", as_version=4)
    parts = judges.load(assignment)
    # (the mounts are undone before the folder holding them is removed)
    with tempfile.TemporaryDirectory(prefix="teenygrad-private-") as tmp, contextlib.ExitStack() as mounts:
        private = Path(tmp)
        root = private / "course"
        shutil.copytree(template, root)
        sub = root / "submitted" / student / assignment
        sub.mkdir(parents=True)
        released = nbformat.read(template / "release" / assignment / f"{assignment}.ipynb", as_version=4)
        fixed, result.notes = normalize(nbformat.read(notebook, as_version=4), source_nb, released)
        nbformat.write(fixed, sub / f"{assignment}.ipynb")
        withhold = {WITHHOLD_ENV: assignment}
        work, status_file = _sandbox(private, {GRADING_DIR_ENV: "", **withhold}, limits, numba_cache,
                                     edition=edition)
        mounts.callback(sandbox.unmount, work)
        mounts.callback(sandbox.unmount, work / "grading")
        grading_dir = work / "grading"
        drawn = judges.write_cases(parts, grading_dir, seed=secrets.randbits(63))
        spec_path = status_file.parent / "spec.json"
        spec = json.loads(spec_path.read_text())
        spec["env"][GRADING_DIR_ENV] = str(grading_dir)
        spec_path.write_text(json.dumps(spec))
        result.sandbox = f"{spec['id']}:{spec['uid']}"
        if os.geteuid() == 0:
            for dirpath, _dirs, files in os.walk(grading_dir):
                os.chown(dirpath, spec["uid"], spec["uid"])
                for f in files:
                    os.chown(os.path.join(dirpath, f), spec["uid"], spec["uid"])

        os.environ["JUPYTER_PATH"] = str(private / "jupyter")
        cfg_extra = {"kernel_name": KERNEL_NAME, "ipc": str(work / "ipc" / "kernel"),
                     "cell_timeout": limits.cell_seconds}
        try:
            run = course.api(root, extra=cfg_extra).autograde(assignment, student)
        finally:
            if sandbox.sweep(json.loads((status_file.parent / "spec.json").read_text())):
                result.notes.append("processes or System V shared memory the notebook left behind were removed")
        verdicts = judges.judge(parts, drawn, grading_dir)

        def speed_box(name: str) -> tuple[Path, dict]:  # a sandbox like the kernel's, for a timing harness
            learner = name != "speed-reference"  # the reference kernel runs on the book's teenygrad
            speed_work, speed_status = _sandbox(private, withhold if learner else {}, limits, numba_cache, name=name,
                                                kernel=False, edition=edition if learner else None)
            mounts.callback(sandbox.unmount, speed_work)
            mounts.callback(sandbox.unmount, speed_work / "grading")
            return speed_status.parent, json.loads((speed_status.parent / "spec.json").read_text())

        for name, part in parts.items():  # speed is timed here, by the grader, never by the notebook
            if part.speed is not None and verdicts[name] is None:
                try:
                    verdicts[name] = speed.judge_speed(fixed, name, part.speed, speed_box, secrets.randbits(63))
                except RuntimeError as e:
                    verdicts[name] = f"not graded: {e}"
        status = json.loads(status_file.read_text()) if status_file.exists() else {}
        if status.get("disk_full") and status.get("outcome") != "disk":
            result.notes.append(f"the notebook filled the {_gib(limits.disk_bytes)} of disk space it may use; "
                                "writes past that failed")
        result.isolation = status.get("isolation", "")

        graded_path = root / "autograded" / student / assignment / f"{assignment}.ipynb"
        graded = nbformat.read(graded_path, as_version=4) if run["success"] and graded_path.exists() else None
        if graded is None:
            result.error = _stopped_reason(status, limits, run.get("log", "") + run.get("error", ""))
        cells = test_cells(graded if graded is not None else source_nb)
        for grade_id, points, cell in cells:
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
        keep.mkdir(parents=True, exist_ok=True)
        if graded is not None and cap_outputs(graded):
            result.notes.append("some outputs were too large and were cut")
        if graded is not None and result.notes:
            graded.cells.insert(0, nbformat.v4.new_markdown_cell(
                "**Autograder notes:** " + "; ".join(result.notes) + "."))
        if graded is None:  # feedback still needs a notebook: the submission, with the reason on top
            graded = nbformat.read(sub / f"{assignment}.ipynb", as_version=4)
            graded.cells.insert(0, nbformat.v4.new_markdown_cell(f"**Autograder:** {result.error}."))
        nbformat.write(graded, keep / f"{assignment}.ipynb")
        result.seconds = float(status.get("seconds", 0.0))
    return result
