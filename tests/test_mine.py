"""mine/: `check` records the code of every passed piece (autograder/mine.py) and `TEENYGRAD=mine` runs it.

The record's rules are tested on a stand-in set of pieces (so these tests do not depend on which functions
the exercises mark today); loading and running use the package's real pieces."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import nbformat
import numpy as np
import pytest

from autograder import mine
from teenygrad import edition

from conftest import REPO

SOLUTIONS = REPO / "solutions"


def solution_parts(assignment: str) -> list[str]:
    return list(mine.notebook_cells(nbformat.read(SOLUTIONS / f"{assignment}.ipynb", as_version=4))[1])


@pytest.fixture
def fake_pieces(monkeypatch):
    """The solution parts of 01-regression whose cell defines a function named like the part, each made a piece
    of that one function, for the record's rules."""
    assignment = "01-regression"
    cells = mine.notebook_cells(nbformat.read(SOLUTIONS / f"{assignment}.ipynb", as_version=4))[1]
    parts = [p for p in solution_parts(assignment) if f"def {p}(" in cells[p]]
    assert len(parts) >= 3
    pieces = {p: [edition.Piece(assignment, p, "teenygrad.fake", p, Path("fake.py"), 1)] for p in parts}
    monkeypatch.setattr(mine.edition, "parts", lambda a: pieces if a == assignment else {})
    return assignment, parts


def notebook(assignment: str, replace: dict[str, str] | None = None) -> nbformat.NotebookNode:
    nb = nbformat.read(SOLUTIONS / f"{assignment}.ipynb", as_version=4)
    for cell in nb.cells:
        part = cell.metadata.get("nbgrader", {}).get("grade_id")
        if part in (replace or {}):
            cell.source = replace[part]
    return nb


def sections(path: Path) -> dict[str, str]:
    return {name: code for name, (_marker, code) in mine.read_mine(path).items()}


def run_file(path: Path) -> dict:
    """Run a mine file as load_mine does (plain Python) and return its namespace."""
    namespace: dict = {"__name__": "mine_file"}
    exec(compile(path.read_text(), str(path), "exec"), namespace)
    return namespace


# --- the record's rules ---------------------------------------------------------------------------------------

def test_all_parts_recorded_in_notebook_order_with_setup_and_parts_list(fake_pieces, tmp_path):
    assignment, parts = fake_pieces
    out = mine.record(notebook(assignment), assignment, parts, [], tmp_path, origin="ex.ipynb")
    path = tmp_path / f"{assignment}.py"
    assert out.changed and out.parts == parts and out.history is None and path.exists()
    text = path.read_text()
    assert text.startswith(f"# mine/{assignment}.py") and "ex.ipynb" in text and "UTC" in text
    assert list(sections(path)) == ["setup", *parts]
    namespace = run_file(path)
    assert namespace["PARTS"] == parts and all(callable(namespace[p]) for p in parts)
    assert f"holds {len(parts)} piece(s) of yours" in out.line()


def test_partial_pass_records_only_the_parts_that_passed(fake_pieces, tmp_path):
    assignment, parts = fake_pieces
    passed = parts[::2]
    out = mine.record(notebook(assignment), assignment, passed, parts[1::2], tmp_path)
    assert out.parts == passed and run_file(tmp_path / f"{assignment}.py")["PARTS"] == passed


def test_nothing_passed_writes_nothing(fake_pieces, tmp_path):
    assignment, parts = fake_pieces
    out = mine.record(notebook(assignment), assignment, [], parts, tmp_path)
    assert not out.parts and not list(tmp_path.iterdir()) and "nothing recorded" in out.line()


def test_an_exercise_without_pieces_records_nothing_and_says_so(tmp_path, monkeypatch):
    monkeypatch.setattr(mine.edition, "parts", lambda a: {})
    out = mine.record(notebook("01-regression"), "01-regression", solution_parts("01-regression"), [], tmp_path)
    assert not list(tmp_path.iterdir()) and out.line() == "nothing to record: exercise 01-regression asks for no piece of teenygrad"


def test_same_code_again_changes_nothing(fake_pieces, tmp_path):
    assignment, parts = fake_pieces
    mine.record(notebook(assignment), assignment, parts, [], tmp_path)
    before = (tmp_path / f"{assignment}.py").read_text()
    out = mine.record(notebook(assignment), assignment, parts, [], tmp_path, origin="elsewhere.ipynb")
    assert not out.changed and "(unchanged)" in out.line()
    assert (tmp_path / f"{assignment}.py").read_text() == before and not (tmp_path / ".history").exists()


def test_changed_code_moves_the_previous_file_to_history(fake_pieces, tmp_path):
    assignment, parts = fake_pieces
    mine.record(notebook(assignment), assignment, parts[:1], [], tmp_path)
    first = (tmp_path / f"{assignment}.py").read_text()
    new_code = f"def {parts[0]}(*args):\n    return 42\n"
    out = mine.record(notebook(assignment, {parts[0]: new_code}), assignment, parts[:2], [], tmp_path)
    assert out.history is not None and out.history.read_text() == first
    assert out.history.parent == tmp_path / ".history" and out.history.name.startswith(f"{assignment}-")
    assert sections(tmp_path / f"{assignment}.py")[parts[0]] == new_code and str(out.history.name) in out.line()
    # once more, with other code: a second history file, nothing overwritten
    out2 = mine.record(notebook(assignment, {parts[0]: new_code.replace("42", "43")}), assignment, parts[:2], [],
                       tmp_path)
    assert out2.history != out.history and len(list((tmp_path / ".history").iterdir())) == 2


def test_a_part_that_fails_now_keeps_its_last_passing_version(fake_pieces, tmp_path):
    assignment, parts = fake_pieces
    mine.record(notebook(assignment), assignment, parts[:2], [], tmp_path)
    passing = sections(tmp_path / f"{assignment}.py")[parts[1]]
    broken = notebook(assignment, {parts[1]: f"def {parts[1]}(*args):\n    return None  # broken\n"})
    out = mine.record(broken, assignment, parts[:1], parts[1:], tmp_path)
    assert out.parts == parts[:2] and out.kept == [parts[1]]
    assert f"kept your earlier passing {parts[1]} (fails now)" in out.line()
    assert sections(tmp_path / f"{assignment}.py")[parts[1]] == passing
    assert out.history is None  # the code recorded did not change


def test_ipython_lines_are_made_inert(fake_pieces, tmp_path):
    assignment, parts = fake_pieces
    original = mine.notebook_cells(notebook(assignment))[1][parts[0]]
    cells = {
        parts[0]: "%load_ext autoreload\n!echo hi\nfiles = !ls\n" + original + "\nfor _ in range(2):\n    %time 1 + 1\n",
        parts[1]: "%%time\n" + mine.notebook_cells(notebook(assignment))[1][parts[1]] + "\n" + parts[1] + "?\n",
        parts[2]: "%%bash\necho not python\n",  # no Python at all: not recorded (no function)
    }
    out = mine.record(notebook(assignment, cells), assignment, parts[:3], [], tmp_path)
    assert out.parts == parts[:2] and "defines no" in out.skipped[parts[2]]
    text = (tmp_path / f"{assignment}.py").read_text()
    assert "pass  # IPython, not run outside the notebook: !echo hi" in text
    assert "    pass  # IPython, not run outside the notebook: %time 1 + 1" in text
    namespace = run_file(tmp_path / f"{assignment}.py")
    assert callable(namespace[parts[0]]) and callable(namespace[parts[1]])


def test_ipython_inside_a_string_is_left_alone():
    source = 'doc = """\n%not a magic\n!nor this\n"""\n'
    assert mine.plain_python(source) == source


def test_a_cell_that_is_not_python_or_lacks_the_function_is_not_recorded(fake_pieces, tmp_path):
    assignment, parts = fake_pieces
    cells = {parts[0]: f"def {parts[0]}(x:\n    return x\n", parts[1]: "def something_else():\n    pass\n"}
    out = mine.record(notebook(assignment, cells), assignment, parts[:3], [], tmp_path)
    assert out.parts == [parts[2]]
    assert "not plain Python" in out.skipped[parts[0]] and f"defines no {parts[1]}" in out.skipped[parts[1]]
    assert "not recorded" in out.line()


def test_old_file_parts_that_are_no_longer_pieces_are_dropped_but_kept_in_history(fake_pieces, tmp_path):
    assignment, parts = fake_pieces
    path = tmp_path / f"{assignment}.py"
    mine.record(notebook(assignment), assignment, parts, [], tmp_path)
    path.write_text(path.read_text().replace(f"# ==== part {parts[0]}:", "# ==== part gone_part:"))
    out = mine.record(notebook(assignment), assignment, parts[1:], [], tmp_path)
    assert "gone_part" not in sections(path) and "gone_part" in out.history.read_text()


# --- loading: TEENYGRAD=mine with the package's real pieces ----------------------------------------------------

def real_pieces() -> list[tuple[str, str]]:
    return sorted({(p.assignment, p.part) for p in edition.pieces()})


def run_with_mine(folder: Path, code: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "TEENYGRAD": "mine", "TEENYGRAD_MINE": str(folder)}
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=600,
                          cwd=REPO)


# a few steps of chapter 9's names GPT; prints the losses as JSON
GPT_STEPS = """
import json, numpy as np, teenygrad as tg
from teenygrad import optim
from teenygrad.gpt import GPT, GPTConfig
cfg = GPTConfig(vocab_size=27, block_size=16, n_layer=1, n_head=4, n_embd=16, norm="rms", norm_weights=False,
                act="relu", bias=False, tie_weights=False, init_std=0.08)
tg.manual_seed(0)
model = GPT(cfg)
opt = optim.Adam(model.parameters(), lr=0.01, betas=(0.9, 0.99))
rng = np.random.default_rng(0)
losses = []
for step in range(20):
    x = rng.integers(0, 27, size=(2, 9))
    _, loss = model(tg.tensor(x[:, :-1]), tg.tensor(x[:, 1:]))
    opt.zero_grad(); loss.backward(); opt.step()
    losses.append(loss.item())
mine = [r for r in tg.edition.table() if r[3] != "the book's"]
print(json.dumps({"losses": losses, "mine": len(mine), "rows": len(tg.edition.table())}))
"""


def test_the_solutions_as_mine_install_every_piece_and_train_like_the_book(tmp_path):
    if not real_pieces():
        pytest.skip("no function of teenygrad is marked as an exercise's piece yet")
    outcomes = mine.record_solutions(tmp_path)
    recorded = {(o.path.stem, p) for o in outcomes for p in o.parts}
    assert recorded == set(real_pieces()) and not any(o.skipped for o in outcomes)
    table = run_with_mine(tmp_path, "import teenygrad as tg\nprint(repr(tg.edition.table()))")
    assert table.returncode == 0 and "could not be loaded" not in table.stderr, table.stderr
    rows = eval(table.stdout)
    assert rows and all(whose.startswith(str(tmp_path)) for *_, whose in rows)
    ours = run_with_mine(tmp_path, GPT_STEPS)
    book = run_with_mine(tmp_path / "empty", GPT_STEPS)
    assert ours.returncode == 0 and book.returncode == 0, ours.stderr + book.stderr
    ours, book = json.loads(ours.stdout), json.loads(book.stdout)
    assert ours["mine"] == ours["rows"] and book["mine"] == 0
    assert ours["losses"] == pytest.approx(book["losses"], abs=1e-4)  # the same arithmetic, piece by piece
    # a second process loads the learner's kernels from numba's disk cache (it once failed there: No module named
    # '<dynamic>', as the mine/ files were not modules numba could import back)
    again = run_with_mine(tmp_path, GPT_STEPS)
    assert again.returncode == 0, again.stderr[-3000:]
    assert json.loads(again.stdout)["losses"] == ours["losses"]


# Recorded by `python -m autograder check` from every solution notebook at 824daae, when the compiler was twelve
# top-level modules: its setup cells say `from teenygrad import codegen, ir, passes` (teenygrad.old_paths maps them)
OLD_MINE = REPO / "tests" / "fixtures" / "mine-824daae"
OLD_MINE_RUN = """
import json, numpy as np, teenygrad as tg
rows = tg.edition.table()
tg.manual_seed(0)
w = tg.randn(6, 3)
def step(x):
    h = (x @ w) * 1.0 + 0.0        # constants the learner's fold_constants folds, a product twice for their cse
    return (h.exp() + (x @ w).exp()).sum(axis=1)
x = tg.randn(5, 6)
print(json.dumps({"whose": {f"{a}/{part}": whose for a, part, _, whose in rows},
                  "compiled": tg.compile(step)(x).numpy().tolist(), "eager": step(x).numpy().tolist()}))
"""


def test_a_mine_folder_recorded_before_the_compiler_became_a_package_still_loads_and_runs():
    files = sorted(OLD_MINE.glob("[0-9][0-9]-*.py"))
    assert len(files) == 10 and "from teenygrad import codegen, grading, ir, passes" in (files[-1]).read_text()
    proc = run_with_mine(OLD_MINE, OLD_MINE_RUN)
    assert proc.returncode == 0 and "could not be loaded" not in proc.stderr and "book's piece is used" not in \
        proc.stderr, proc.stderr
    out = json.loads(proc.stdout)
    parts = {(p.assignment, p.part) for p in edition.pieces()}  # the exercises' parts now: some have changed since
    saved = [(f, part) for f in files for part in mine.read_mine(f) if part != "setup"]
    recorded = {f"{f.stem}/{part}": str(f) for f, part in saved if (f.stem, part) in parts}
    gone = [(f, part) for f, part in saved if (f.stem, part) not in parts]
    # 19 of its parts are pieces still (exercise 10's cse is not: chapter 10 writes CSE out), each one the learner's
    assert len(saved) >= 30 and len(recorded) >= 19 and {k: out["whose"].get(k) for k in recorded} == recorded
    for f, part in gone:  # a part that is no longer a piece is ignored, and the message says so
        assert f"{f} lists part {part!r}, which is no longer a piece of exercise {f.stem}; it is ignored" in \
            proc.stderr, proc.stderr
    assert np.allclose(out["compiled"], out["eager"], rtol=1e-5)  # compiled through the learner's index_expr


def test_every_old_module_path_is_the_module_at_its_new_place():
    from teenygrad import old_paths
    code = "import importlib, json; import teenygrad\n" + \
        f"print(json.dumps({{o: importlib.import_module(o) is importlib.import_module(n) for o, n in {old_paths.MOVED!r}.items()}}))"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=REPO)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == dict.fromkeys(old_paths.MOVED, True)


def test_a_mine_file_that_raises_leaves_the_book_pieces_and_says_so(tmp_path):
    (tmp_path / "06-tensor-autograd.py").write_text("raise RuntimeError('oops')\nPARTS = []\n")
    proc = run_with_mine(tmp_path, "import teenygrad as tg\nprint(sum(r[3] != \"the book's\" for r in tg.edition.table()))")
    assert proc.returncode == 0 and proc.stdout.strip() == "0"
    assert "06-tensor-autograd.py could not be loaded (RuntimeError: oops)" in proc.stderr


# --- the command: python -m autograder check -------------------------------------------------------------------

def test_check_records_the_passed_pieces_and_says_so(tmp_path):
    pieces = real_pieces()
    if not pieces:
        pytest.skip("no function of teenygrad is marked as an exercise's piece yet")
    assignment = pieces[0][0]
    folder = tmp_path / "mine"
    env_mine = {**os.environ, "TEENYGRAD_MINE": str(folder)}
    nb = tmp_path / f"{assignment}.ipynb"
    nb.write_bytes((SOLUTIONS / f"{assignment}.ipynb").read_bytes())
    skipped = subprocess.run([sys.executable, "-m", "autograder", "check", str(nb), "--no-mine"], env=env_mine,
                             capture_output=True, text=True, cwd=REPO, timeout=900)
    assert skipped.returncode == 0 and "mine: not recorded (--no-mine)" in skipped.stdout and not folder.exists()
    proc = subprocess.run([sys.executable, "-m", "autograder", "check", str(nb), "--json"], env=env_mine,
                          capture_output=True, text=True, cwd=REPO, timeout=900)
    result = json.loads(proc.stdout)
    ours = sorted(p for a, p in pieces if a == assignment)
    assert result["score"] == result["max_score"] and f"holds {len(ours)} piece(s) of yours" in result["mine"]
    assert sorted(mine.read_mine(folder / f"{assignment}.py")) == sorted(["setup", *ours])
