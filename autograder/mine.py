"""mine/: the learner's own pieces of teenygrad, recorded by `python -m autograder check`.

After a notebook is graded, every part that scored full marks and is a piece of teenygrad (a function the
package marks with `@exercise(assignment, part)`) is written to `mine/NN-name.py`:

    # header: the exercise, its parts, when, from which notebook
    # ==== setup ====                                   the notebook's setup cell (grade_id "setup")
    # ==== part unbroadcast: passed <UTC time>, <notebook> ====
    def unbroadcast(grad, shape): ...                   each passed part's solution cell, in notebook order
    PARTS = ["unbroadcast"]

which is what `teenygrad.edition.load_mine` reads (`TEENYGRAD=mine`). Nothing is lost or silently overwritten:

- a previous file whose code differs is moved to `mine/.history/NN-name-<UTC time>.py` first;
- a part that passed before but fails now keeps its last passing version (the check says so);
- a part whose code did not change keeps the time it first passed, so checking again rewrites nothing.

A learner's IPython lines (`%timeit`, `!ls`, `x = !ls`, `f?`) are not Python: each becomes `pass  # IPython...`
so the file still runs; a cell magic such as `%%time` is commented out and its Python body kept.

Only files are written here: the learner's code is never run by the grader's process.
"""
from __future__ import annotations

import ast
import re
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

from teenygrad import edition

SECTION = re.compile(r"^# ==== (setup|part ([A-Za-z_][A-Za-z0-9_]*))\b.*====\s*$")
PARTS_LINE = re.compile(r"^PARTS = \[.*\]\s*$")
PYTHON_CELL_MAGICS = {"time", "timeit", "capture", "prun"}  # cell magics whose body is Python


@dataclass
class Outcome:
    """What `record` did, for the one line the check prints."""

    path: Path
    parts: list[str] = field(default_factory=list)     # what the file holds now, in notebook order
    kept: list[str] = field(default_factory=list)      # passed before, fail now: the earlier version stays
    skipped: dict[str, str] = field(default_factory=dict)  # passed, but not recorded: why
    history: Path | None = None                        # where the previous version went
    changed: bool = False
    no_pieces: bool = False                            # the exercise asks for no function of teenygrad

    def line(self) -> str:
        where = _short(self.path)
        if self.no_pieces:
            return f"nothing to record: exercise {self.path.stem} asks for no piece of teenygrad"
        if not self.parts:
            text = f"nothing recorded in {where} (no piece of teenygrad passed yet)"
        else:
            text = f"{where} holds {len(self.parts)} piece(s) of yours: {', '.join(self.parts)}"
            if not self.changed:
                text += " (unchanged)"
        if self.kept:
            text += f"; kept your earlier passing {', '.join(self.kept)} (fails now)"
        for part, why in self.skipped.items():
            text += f"; {part} not recorded: {why}"
        if self.history:
            text += f"; the previous version is in {_short(self.history)}"
        return text


def _short(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


def utc_now() -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())


# ---- a notebook cell as plain Python ---------------------------------------------------------------------------

def plain_python(source: str) -> str:
    """`source` with IPython's own syntax made inert: magics and shell escapes become `pass  # IPython: ...`
    (same indentation, so a loop around `%time f()` still parses), cell magics are commented out."""
    lines = source.splitlines()
    first = next((i for i, line in enumerate(lines) if line.strip()), None)
    if first is not None and lines[first].lstrip().startswith("%%"):
        magic = lines[first].lstrip()[2:].split(maxsplit=1)[0] if lines[first].strip() != "%%" else ""
        lines[first] = f"# IPython, not run outside the notebook: {lines[first].strip()}"
        if magic not in PYTHON_CELL_MAGICS:  # %%bash, %%writefile...: the body is not Python either
            lines = [lines[first]] + [f"# {line}" for line in lines[first + 1:]]
            return "\n".join(lines[:first] + lines) + "\n" if first else "\n".join(lines) + "\n"
    try:
        from IPython.core.inputtransformer2 import TransformerManager
        transformed = TransformerManager().transform_cell("\n".join(lines) + "\n").splitlines()
    except Exception:  # no IPython, or it gave up: the lines that look like magics
        transformed = [("get_ipython()" if re.match(r"\s*([%!]|\w+\s*=\s*[%!])", line) else line) for line in lines]
    if len(transformed) != len(lines):  # a magic continued with backslashes: fall back to line-wise
        transformed = [("get_ipython()" if re.match(r"\s*([%!]|\w+\s*=\s*[%!])", line) else line) for line in lines]
    out = []
    for original, new in zip(lines, transformed):
        if new != original and "get_ipython()" in new:
            indent = original[:len(original) - len(original.lstrip())]
            out.append(f"{indent}pass  # IPython, not run outside the notebook: {original.strip()}")
        else:
            out.append(original)
    return "\n".join(out).rstrip() + "\n"


def top_level_names(source: str) -> set[str]:
    """The names a module's top level binds (defs, classes, assignments, imports), and `Class.method` for the
    methods its classes define (a piece's `spellings`)."""
    names: set[str] = set()
    for node in ast.parse(source).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
            body = node.body if isinstance(node, ast.ClassDef) else []
            names |= {f"{node.name}.{f.name}" for f in body if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))}
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            for target in node.targets if isinstance(node, ast.Assign) else [node.target]:
                names |= {n.id for n in ast.walk(target) if isinstance(n, ast.Name)}
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
    return names


def python_error(source: str, label: str) -> str | None:
    """None if `source` compiles, else a short reason."""
    try:
        compile(source, label, "exec")
    except SyntaxError as e:
        return f"its cell is not plain Python (line {e.lineno}: {e.msg})"
    return None


# ---- reading a notebook and a mine file ---------------------------------------------------------------------------

def notebook_cells(nb: nbformat.NotebookNode) -> tuple[str | None, dict[str, str]]:
    """(the setup cell's source, {part: solution cell source}) in notebook order."""
    setup, solutions = None, {}
    for cell in nb.cells:
        meta = cell.get("metadata", {}).get("nbgrader", {})
        if cell.get("cell_type") != "code" or not isinstance(meta, dict):
            continue
        grade_id = meta.get("grade_id")
        if grade_id == "setup":
            setup = cell.source
        elif meta.get("solution") and isinstance(grade_id, str):
            solutions[grade_id] = cell.source
    return setup, solutions


def read_mine(path: Path) -> dict[str, tuple[str, str]]:
    """{"setup" or part: (its section's marker line, its code)} of a mine file; {} if it has no sections."""
    sections: dict[str, tuple[str, list[str]]] = {}
    current = None
    for line in path.read_text(errors="replace").splitlines():
        match = SECTION.match(line)
        if match:
            current = match.group(2) or "setup"
            sections[current] = (line, [])
        elif PARTS_LINE.match(line):
            current = None
        elif current is not None:
            sections[current][1].append(line)
    return {name: (marker, "\n".join(body).strip("\n") + "\n") for name, (marker, body) in sections.items()}


def _sections_text(text: str) -> str:
    """A mine file without its header: what decides whether it changed."""
    lines = text.splitlines()
    first = next((i for i, line in enumerate(lines) if SECTION.match(line)), len(lines))
    return "\n".join(lines[first:])


def render(assignment: str, origin: str, when: str, setup: str, parts: list[tuple[str, str, str]]) -> str:
    """The text of mine/NN-name.py; `parts` are (part, its marker line, its code) in notebook order."""
    names = [p for p, _, _ in parts]
    out = [f"# mine/{assignment}.py: your code for exercise {assignment}, recorded by `python -m autograder check`.",
           f"# Parts: {', '.join(names)}. Written {when} from {origin}.",
           "# `TEENYGRAD=mine` (or teenygrad.edition.load_mine()) runs teenygrad with these pieces in place of the",
           "# book's. Edit your notebook, not this file: the next check rewrites it (older versions: mine/.history/).",
           "",
           "# ==== setup ====",
           setup.rstrip("\n"),
           ""]
    for _part, marker, code in parts:
        out += ["", marker, code.rstrip("\n"), ""]
    out += ["", f"PARTS = {names!r}", ""]
    return "\n".join(out)


# ---- recording ---------------------------------------------------------------------------------------------------

def _history_path(folder: Path, assignment: str) -> Path:
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    path, n = folder / ".history" / f"{assignment}-{stamp}.py", 1
    while path.exists():  # two checks within a second: never overwrite
        n += 1
        path = folder / ".history" / f"{assignment}-{stamp}-{n}.py"
    return path


def record(nb: nbformat.NotebookNode, assignment: str, passed: list[str], failed: list[str],
           folder: Path | None = None, origin: str = "a notebook") -> Outcome:
    """Record the graded notebook `nb`'s passed parts in `folder/assignment.py` (see the module docstring).

    `passed` are the parts that scored full marks, `failed` the parts graded now that did not."""
    folder = Path(folder or edition.mine_dir())
    path = folder / f"{assignment}.py"
    outcome = Outcome(path)
    pieces = edition.parts(assignment)  # only what teenygrad can swap in is worth recording
    outcome.no_pieces = not pieces
    setup, solutions = notebook_cells(nb)
    old = read_mine(path) if path.exists() else {}
    when = utc_now()
    chosen: list[tuple[str, str, str]] = []
    setup_code = plain_python(setup or "")
    why_setup = python_error(setup_code, "setup")
    if why_setup and "setup" in old:  # cannot happen with a locked setup cell; keep what ran before
        setup_code = old["setup"][1]
    for part in [p for p in solutions if p in pieces] + [p for p in pieces if p not in solutions]:
        code = plain_python(solutions[part]) if part in solutions else ""
        if part in passed and part in solutions:
            why = f"the setup cell: {why_setup}" if why_setup else python_error(code, part)
            defined = set() if why else top_level_names(code)
            missing = [] if why else [p.qualname for p in pieces[part] if not defined & set(p.spellings)]
            if missing:
                why = f"the cell defines no {', '.join(missing)} at the top level"
            if not why:
                marker = f"# ==== part {part}: passed {when}, {origin} ===="
                if part in old and old[part][1] == code.rstrip("\n") + "\n":
                    marker = old[part][0]  # the same code: it keeps the time it first passed
                chosen.append((part, marker, code))
                continue
            outcome.skipped[part] = why
        if part in old:  # passed before, not now (or not recordable now): keep the last passing version
            chosen.append((part, old[part][0], old[part][1]))
            if part in failed or part in outcome.skipped:
                outcome.kept.append(part)
    outcome.parts = [p for p, _, _ in chosen]
    if not chosen:
        return outcome  # nothing to write; an old file without parts (hand-edited) is left alone
    text = render(assignment, origin, when, setup_code, chosen)
    if path.exists():
        previous = path.read_text(errors="replace")
        if _sections_text(previous) == _sections_text(text):
            return outcome  # the same code: leave the file (and its times) alone
        outcome.history = _history_path(folder, assignment)
        outcome.history.parent.mkdir(parents=True, exist_ok=True)
        shutil.move(path, outcome.history)
    folder.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(text)
    tmp.replace(path)
    outcome.changed = True
    return outcome


def record_solutions(folder: Path, solutions: Path | None = None) -> list[Outcome]:
    """Every part of every solutions notebook recorded in `folder`, as if each had passed: the book's own
    answers as "mine" (the capstone's reference; tests)."""
    from autograder import course

    outcomes = []
    for path in sorted((solutions or course.SOLUTIONS).glob("[0-9][0-9]-*.ipynb")):
        nb = nbformat.read(path, as_version=4)
        outcomes.append(record(nb, path.stem, list(notebook_cells(nb)[1]), [], folder, origin=str(path.name)))
    return outcomes
