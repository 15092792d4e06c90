"""Shared helpers: run the autograder as a learner would, and build the book once per test session."""
from __future__ import annotations

import fcntl
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import nbformat
import pytest

REPO = Path(__file__).resolve().parent.parent

# The suite runs one worker per core: idle OpenMP threads that spin for long steal the other worker's core
# (teenygrad.tuning explains the setting; importing teenygrad no longer sets it, so the test harness does).
os.environ.setdefault("GOMP_SPINCOUNT", "10000")
# `check` records passed pieces in mine/ (autograder/mine.py): never in the repository's own mine/ during tests
os.environ.setdefault("TEENYGRAD_MINE", tempfile.mkdtemp(prefix="teenygrad-test-mine-"))
# The long jobs the suite starts (the book build, the graders and their sandboxes) get their worker's share of
# the cores, not all of them: with two workers each starting a job that threads its loops over every core,
# a parallel loop waits for a thread that has lost its core, and both jobs run far slower than on one thread
# each. The workers' own processes keep numba's default, so the tests of the threaded kernels split real work.
JOB_THREADS = str(max(1, len(os.sched_getaffinity(0)) // int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))))


def job_env() -> dict[str, str]:
    """The environment of a long job the suite starts: this process's (as a test has set it), its share of threads."""
    return {**os.environ, "NUMBA_NUM_THREADS": JOB_THREADS}


def solution_cells(path: Path) -> tuple[dict[str, str], dict[str, tuple[float, str]]]:
    """A solutions notebook's parts: {part: solution cell source}, {part: (points, hidden-test source)}.

    The house rules every solutions notebook follows are checked once in tests/test_notebooks.py.
    """
    solutions, tests = {}, {}
    for cell in nbformat.read(path, as_version=4).cells:
        meta = cell.metadata.get("nbgrader", {})
        if meta.get("solution"):
            solutions[meta["grade_id"]] = cell.source
        elif meta.get("grade"):
            src = cell.source
            hidden = last_hidden_block(src)
            tests[meta["grade_id"].removeprefix("test_")] = (meta["points"], hidden)
    return solutions, tests


def last_hidden_block(source: str) -> str:
    """The hidden block that reports a test cell's part: its last. (A cell may open with another, which installs the
    grader's stand-in for a piece the part runs on, around the visible tests too: exercise 9's model.)"""
    start = source.rindex("### BEGIN HIDDEN TESTS")
    return source[start:source.index("### END HIDDEN TESTS", start)]


def notebook_namespace(path: Path, transform=None, after_exec=None) -> tuple[dict, dict]:
    """Run a solutions notebook's setup and solution cells (each solution source passed through
    `transform(grade_id, source)` first); return the namespace and each part's hidden-test source.
    `after_exec(namespace)` runs after every executed cell (e.g. to swap a helper in)."""
    namespace: dict = {}
    hidden = {}
    for cell in nbformat.read(path, as_version=4).cells:
        meta = cell.metadata.get("nbgrader", {})
        if cell.cell_type != "code":
            continue
        source = cell.source
        if meta.get("solution") and transform is not None:
            source = transform(meta["grade_id"], source)
        if meta.get("solution") or meta.get("grade_id") == "setup":
            exec(compile(source, f"<solution cell {meta['grade_id']}>", "exec"), namespace)
            if after_exec is not None:
                after_exec(namespace)
        elif meta.get("grade"):
            hidden[meta["grade_id"].removeprefix("test_")] = last_hidden_block(source)
    return namespace, hidden


def run_hidden(judge_parts: dict, namespace: dict, hidden: dict, parts, tmp_path: Path, seed: int) -> dict:
    """Run the hidden tests of `parts` as the grader would (cases drawn with `seed`); return the verdicts.
    TEENYGRAD_GRADING_DIR must point at tmp_path (monkeypatch.setenv)."""
    from autograder.judges import judge, write_cases

    drawn = write_cases(judge_parts, tmp_path, seed)
    for part in parts:
        exec(compile(hidden[part], f"<hidden tests {part}>", "exec"), namespace)
    return judge(judge_parts, drawn, tmp_path)


def replacing(part: str, old: str, new: str):
    """A `transform` for notebook_namespace that plants a mistake in one part's solution."""
    def transform(grade_id: str, source: str) -> str:
        if grade_id != part:
            return source
        assert old in source, (part, old)
        return source.replace(old, new)
    return transform


def autograder(*args: str, check: bool = False) -> subprocess.CompletedProcess:
    """`python -m autograder ARGS` in a subprocess, exactly as the README tells a learner to run it."""
    proc = subprocess.run([sys.executable, "-m", "autograder", *args], cwd=REPO, capture_output=True,
                          text=True, timeout=900, env=job_env())
    if check and proc.returncode != 0:
        raise AssertionError(f"autograder {args} exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}")
    return proc


def grade_json(notebook: Path, *extra: str, feedback: bool = True) -> dict:
    """`check --json` on notebook; its feedback page (unless not wanted) beside it as NAME.html."""
    page = ["--feedback", str(notebook.with_suffix(".html"))] if feedback else ["--no-feedback"]
    proc = autograder("check", str(notebook), "--json", *page, *extra, check=True)
    return json.loads(proc.stdout)


def book_figures(chapter: str) -> dict[str, float]:
    """The figures a chapter glued into its text, read back from the book build's executed notebook
    (`chapter` like "09-gpt"; use with the book_build fixture)."""
    glue_file = REPO / "book" / "_build" / "jupyter_execute" / "chapters" / f"{chapter}.glue.json"
    return {name: float(out["data"]["text/plain"]) for name, out in json.loads(glue_file.read_text()).items()}


@pytest.fixture(scope="session")
def book_build() -> subprocess.CompletedProcess:
    """Build the book (as `make book` does) once per test process; tests inspect the result.

    With several pytest workers, a lock makes the builds take turns: the first executes the chapters,
    the others find them in the execution cache and only re-check the build.
    """
    (REPO / "book" / "_build").mkdir(parents=True, exist_ok=True)
    done = REPO / "book" / "_build" / ".build-result.json"  # what this run's first build gave, for the others
    run_id = os.environ.get("PYTEST_XDIST_TESTRUNUID")      # the same in every worker of one pytest run
    with open(REPO / "book" / "_build" / ".build.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if run_id and done.exists():
            result = json.loads(done.read_text())
            if result.pop("run") == run_id:
                return subprocess.CompletedProcess(**result)
        proc = subprocess.run([sys.executable, str(REPO / "book" / "build.py")], cwd=REPO, capture_output=True,
                              text=True, timeout=3600, env=job_env())
        done.write_text(json.dumps({"run": run_id, "args": proc.args, "returncode": proc.returncode,
                                    "stdout": proc.stdout, "stderr": proc.stderr}))
        return proc


def pytest_configure(config):
    """Compile teenygrad's kernels once, before any test runs, and let every test, the book build and every
    job they start load them from one numba cache.

    The graders' warm cache (`autograder.caches.numba_cache`: every op on each dtype, its two halves compiled
    on two cores at once) is built first, as the first grading would build it; a copy of it becomes this
    suite's NUMBA_CACHE_DIR, which the workers and every process they start inherit. Without it the book's
    chapters, the in-process tests and the graders' warm-up each compiled the same kernels, often at the same
    moment on the suite's two cores. The copy is kept beside the warm cache, keyed by the same digest of
    teenygrad's source, so a second run starts warm; the graders' own cache is never written by a test.
    A caller's NUMBA_CACHE_DIR is left alone."""
    if hasattr(config, "workerinput") or "NUMBA_CACHE_DIR" in os.environ:  # a worker: the controller did it
        return
    import shutil

    from autograder import caches

    warm = caches.numba_cache(log=lambda line: print(f"\n[tests] {line}", file=sys.stderr, flush=True))
    if warm is None:  # the warm-up failed: each process compiles what it uses, as before
        return
    suite = warm.parent.parent / "numba-suite" / warm.name
    if not suite.is_dir():
        suite.parent.mkdir(parents=True, exist_ok=True)
        building = Path(tempfile.mkdtemp(prefix=".copying-", dir=suite.parent))
        shutil.copytree(warm, building, dirs_exist_ok=True)
        try:
            building.rename(suite)
        except OSError:  # another run copied it first
            shutil.rmtree(building, ignore_errors=True)
    os.environ["NUMBA_CACHE_DIR"] = str(suite)


CHAPTER_FILE = re.compile(r"test_ch(\d\d)_\w+\.py$")  # tests/test_chNN_subject.py: chapter NN's tests


def pytest_collection_modifyitems(config, items):
    """Mark each chapter's tests `chN` (from its file's name: `pytest -m ch10` runs chapter 10's). Then start the
    book build first and run the other tests beside it (the build is the longest thing the suite
    does: it executes every chapter). The first file that needs the book goes first, its book tests at its
    head, so one worker starts building at once; every other file needing the book goes last, when the build
    is done, so no worker sits waiting for it. (pyproject's --no-loadscope-reorder keeps this order under
    xdist, which otherwise orders files by their number of tests.)"""
    for item in items:
        if match := CHAPTER_FILE.search(item.nodeid.split("::")[0]):
            item.add_marker(f"ch{int(match.group(1))}")

    def file_of(item):
        return item.nodeid.split("::")[0]
    book_files = list(dict.fromkeys(file_of(i) for i in items if "book_build" in getattr(i, "fixturenames", ())))
    if not book_files:
        return
    first = book_files[0]
    rank = {f: 1 for f in dict.fromkeys(map(file_of, items))}
    rank.update({f: 2 for f in book_files})
    rank[first] = 0
    items.sort(key=lambda i: (rank[file_of(i)], file_of(i) == first and "book_build" not in i.fixturenames))


@pytest.fixture(autouse=True)
def _pieces_restored():
    """A test that installs a notebook's pieces in teenygrad (`edition.install`) leaves the package as it found it."""
    from teenygrad import edition
    saved = dict(edition._INSTALLED), dict(edition._ORIGIN)
    yield
    edition._INSTALLED.clear()
    edition._INSTALLED.update(saved[0])
    edition._ORIGIN.clear()
    edition._ORIGIN.update(saved[1])


@pytest.fixture
def grading_dir(tmp_path, monkeypatch):
    """A folder the hidden tests' `report` writes into, as under the autograder."""
    from teenygrad.grading import GRADING_DIR_ENV
    monkeypatch.setenv(GRADING_DIR_ENV, str(tmp_path))
    return tmp_path
