"""Grade one submission, write `result.json` beside the job.

Run by `autograder.batch` in a process (and process group) of its own, so that whatever happens to one
submission, even a crash of nbgrader itself, costs only that submission. The batch forks each worker from a
server that has imported this module once (`autograder.workers`, `forked`); `python -m autograder.worker JOB.json`
runs one by hand.
"""
from __future__ import annotations

import hashlib
import json
import os
import resource
import sys
import warnings
from pathlib import Path

import nbformat

from autograder import sandbox
from autograder.autograde import Limits, PartResult, Result, grade_in_private_course, part_name, test_cells
from autograder.notebooks import BadNotebookError, read_notebook

WORKER_MEMORY_BYTES = 8 * 2**30


def run(job: dict) -> Result:
    keep = Path(job["keep"])
    notebook = Path(job["notebook"])
    assignment, student = job["assignment"], job["student"]
    sha = hashlib.sha256(notebook.read_bytes()).hexdigest()
    try:
        nb = read_notebook(notebook)  # not JSON, empty, nbformat 3 (converted), ...
        found = nb.metadata.get("teenygrad", {}).get("assignment")
        if isinstance(found, str) and found != assignment:
            raise BadNotebookError(f"this notebook is assignment {found}, not {assignment}")
        normalized = keep / "submission.ipynb"
        keep.mkdir(parents=True, exist_ok=True)
        nbformat.write(nb, normalized)
        result = grade_in_private_course(Path(job["template"]), assignment, student, normalized,
                                         Limits(**job["limits"]), keep, job.get("numba_cache"),
                                         job.get("edition"))
    except BadNotebookError as e:
        source = nbformat.read(Path(job["template"]) / "source" / assignment / f"{assignment}.ipynb", as_version=4)
        reason = str(e).replace(f"{notebook}: ", "")
        result = Result(assignment, student, error=f"not graded: {reason}",
                        parts=[PartResult(part_name(g), 0.0, p, "not graded: " + reason)
                               for g, p, _ in test_cells(source)])
        note = f"**Autograder:** this submission could not be graded: {reason}."
        source.cells.insert(0, nbformat.v4.new_markdown_cell(note))
        keep.mkdir(parents=True, exist_ok=True)
        nbformat.write(source, keep / f"{assignment}.ipynb")
    result.sha256 = sha
    return result


def main(job_file: str) -> int:
    warnings.filterwarnings("ignore")
    # defence in depth: a flood of output is held in this process's memory; let it fail here, not the batch
    resource.setrlimit(resource.RLIMIT_AS, (WORKER_MEMORY_BYTES, WORKER_MEMORY_BYTES))
    sandbox.private_mounts()  # the sandbox's tmpfs work folder is mounted here and vanishes with this process
    job_path = Path(job_file)
    job = json.loads(job_path.read_text())
    result = run(job)
    (job_path.parent / "result.json").write_text(json.dumps(result.to_json()))
    return 0


def forked(job_file: str, log_file: str) -> None:
    """A worker forked by the batch's fork server: a session of its own (the batch kills its process group on a
    timeout; the sandboxed kernel has a session and a wall-clock limit of its own), its output to `log_file`."""
    os.setsid()
    log = os.open(log_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.dup2(log, 1)
    os.dup2(log, 2)
    os.close(log)
    sys.exit(main(job_file))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
