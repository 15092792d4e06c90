"""The nbgrader course: where assignments come from and how nbgrader is configured for them.

An assignment is a solutions notebook `solutions/NN-name.ipynb` (the nbgrader source). Its id is
`NN-name`, and the course holds it as `source/NN-name/NN-name.ipynb`, nbgrader's usual layout.
"""
from __future__ import annotations

import contextlib
import io
import logging
import os
import shutil
import sys
from pathlib import Path

import nbformat
from traitlets.config import Config

from autograder.notebooks import grade_ids

REPO = Path(__file__).resolve().parent.parent
SOLUTIONS = REPO / "solutions"
EXERCISES = REPO / "exercises"
COURSE_ID = "teenygrad"
# nbgrader runs the `alembic` and `jupyter` commands it was installed with: find them even when this
# interpreter was started by path (.venv/bin/python) without activating the venv.
os.environ["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])
CELL_TIMEOUT = 300  # seconds a single cell may run before nbgrader stops it


def assignments() -> list[str]:
    """Every assignment id, in chapter order."""
    return sorted(p.stem for p in SOLUTIONS.glob("[0-9][0-9]-*.ipynb"))


def assignment_title(assignment: str) -> str:
    nb = nbformat.read(SOLUTIONS / f"{assignment}.ipynb", as_version=4)
    first = nb.cells[0].source.splitlines()[0] if nb.cells else ""
    return first.lstrip("# ").strip() or assignment


def identify(nb: nbformat.NotebookNode) -> str | None:
    """Which assignment a learner's notebook belongs to: its metadata, else the grade ids of its cells."""
    named = nb.metadata.get("teenygrad", {}).get("assignment")
    if isinstance(named, str):
        return named  # the caller checks that it is one we know
    ids = grade_ids(nb)
    best, overlap = None, 0
    for a in assignments():
        common = len(ids & grade_ids(nbformat.read(SOLUTIONS / f"{a}.ipynb", as_version=4)))
        if common > overlap:
            best, overlap = a, common
    return best


def config(root: Path, db_url: str | None = None, extra: dict | None = None) -> Config:
    """nbgrader's configuration for the course at `root`; `extra` sets up the sandboxed kernel."""
    c = Config()
    c.CourseDirectory.root = str(root)
    c.CourseDirectory.course_id = COURSE_ID
    if db_url:
        c.CourseDirectory.db_url = db_url
    extra = extra or {}
    c.Execute.timeout = extra.get("cell_timeout", CELL_TIMEOUT)
    c.Execute.interrupt_on_timeout = True  # pure Python stops; a numba loop is stopped by the wall clock
    if "kernel_name" in extra:  # never the kernel the notebook asks for: always the sandbox
        c.Execute.kernel_name = extra["kernel_name"]
        c.KernelManager.transport = "ipc"  # Unix sockets: the sandbox has no network at all
        c.KernelManager.ip = extra["ipc"]
    # Plain tracebacks, as Python prints them: IPython's default ("Context") inspects every frame, and a learner's
    # endless recursion (some 3,000 frames) then took 14 s per error, measured on exercise 1
    c.Execute.extra_arguments = ["--HistoryManager.hist_file=:memory:", "--IPKernelApp.log_level=ERROR",
                                 "--InteractiveShell.xmode=Plain"]
    c.Application.log_level = logging.ERROR
    return c


def api(root: Path, db_url: str | None = None, extra: dict | None = None):
    """nbgrader's own API on the course at `root` (imported late: nbgrader is slow to import)."""
    from nbgrader.apps import NbGraderAPI
    from nbgrader.coursedir import CourseDirectory

    cfg = config(root, db_url, extra)
    with contextlib.redirect_stderr(io.StringIO()):  # exchange warnings irrelevant to local grading
        return NbGraderAPI(coursedir=CourseDirectory(config=cfg), config=cfg)


def add_source(root: Path, assignment: str) -> Path:
    """Copy the assignment's source notebook into the course."""
    dest = root / "source" / assignment
    dest.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(SOLUTIONS / f"{assignment}.ipynb", dest / f"{assignment}.ipynb")
    return dest


def template(assignment: str) -> Path:
    """A course holding just `assignment`, generated once per version of its solutions notebook.

    generate_assignment takes seconds; the result only depends on the source notebook, so it is cached
    (in $XDG_CACHE_HOME/teenygrad, or ~/.cache/teenygrad) under the notebook's hash.
    """
    import hashlib
    import tempfile

    digest = hashlib.sha256((SOLUTIONS / f"{assignment}.ipynb").read_bytes()).hexdigest()[:16]
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "teenygrad" / "templates"
    done = cache / f"{assignment}-{digest}"
    if (done / "gradebook.db").exists():
        return done
    cache.mkdir(parents=True, exist_ok=True)
    building = Path(tempfile.mkdtemp(prefix=f".{assignment}-", dir=cache))
    generate(building, assignment)  # keeps release/: the stubs that restore a deleted solution cell
    try:
        building.rename(done)  # atomic: a parallel run either wins or finds it done
    except OSError:
        shutil.rmtree(building, ignore_errors=True)
    return done


def generate(root: Path, assignment: str, db_url: str | None = None) -> Path:
    """nbgrader generate_assignment: records the assignment in the gradebook, writes the learner version."""
    add_source(root, assignment)
    result = api(root, db_url).generate_assignment(assignment)
    if not result["success"]:
        raise RuntimeError(f"nbgrader generate_assignment {assignment} failed:\n"
                           f"{result.get('log', '')}{result.get('error', '')}")
    return root / "release" / assignment / f"{assignment}.ipynb"
