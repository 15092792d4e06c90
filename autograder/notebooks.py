"""Reading notebooks we did not write: every way a file can fail to be a notebook gets one clear message."""
from __future__ import annotations

import json
from pathlib import Path

import nbformat

# One limit for every way a notebook reaches the grader (`check`, `collect`, `grade`). A notebook with many
# plots is a few MB; past this it is almost always a stored data set or a flood of output.
MAX_NOTEBOOK_BYTES = 64 * 2**20


def too_big(size: int) -> str:
    """The one message for a notebook over the limit: what is wrong and what to do."""
    return (f"the file is {size / 2**20:.0f} MB, over the autograder's limit of {MAX_NOTEBOOK_BYTES >> 20} MB for a "
            "notebook: clear its outputs (Edit > Clear Outputs of All Cells), save and hand it in again")


class BadNotebookError(Exception):
    """A file that cannot be graded, with a message meant for the person who gave it to us."""


def read_notebook(path: Path) -> nbformat.NotebookNode:
    """Parse `path` as a Jupyter notebook (converting nbformat 3 to 4) or raise BadNotebookError saying why."""
    if not path.exists():
        raise BadNotebookError(f"{path}: no such file")
    if path.is_dir():
        raise BadNotebookError(f"{path}: is a folder, not a notebook file")
    size = path.stat().st_size
    if size > MAX_NOTEBOOK_BYTES:
        raise BadNotebookError(f"{path}: {too_big(size)}")
    raw = path.read_bytes()
    if not raw.strip():
        raise BadNotebookError(f"{path}: the file is empty (0 cells): save the notebook from JupyterLab and try again")
    try:
        data = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise BadNotebookError(f"{path}: not a notebook: the file is not valid JSON ({e})") from None
    if not isinstance(data, dict) or "nbformat" not in data or not ("cells" in data or "worksheets" in data):
        raise BadNotebookError(f"{path}: not a notebook: JSON without notebook cells")
    try:
        nb = nbformat.reads(raw.decode("utf-8"), as_version=4)  # converts nbformat 3 on the way
        nbformat.validate(nb)
    except Exception as e:
        first_line = str(e).splitlines()[0][:200]
        raise BadNotebookError(f"{path}: not a valid notebook ({type(e).__name__}: {first_line})") from None
    return nb


def grade_ids(nb: nbformat.NotebookNode) -> set[str]:
    """The nbgrader grade_ids of a notebook's cells."""
    ids = set()
    for cell in nb.cells:
        meta = cell.get("metadata", {}).get("nbgrader", {})
        if isinstance(meta, dict) and isinstance(meta.get("grade_id"), str):
            ids.add(meta["grade_id"])
    return ids
