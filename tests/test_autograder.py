"""The autograder end to end, driven through its command line as a learner or instructor would."""
from __future__ import annotations

import json
import re

import nbformat
import pytest

from autograder import course

from conftest import autograder, grade_json

ASSIGNMENTS = course.assignments()


def test_there_are_assignments():
    assert "01-regression" in ASSIGNMENTS


def test_a_learners_check_of_a_solution_scores_full_marks_with_a_feedback_page(tmp_path):
    """`check` as a learner runs it (every solution is graded as part of a class in tests/test_autograder_parts.py)."""
    assignment = "02-tensors"
    nb = tmp_path / f"{assignment}.ipynb"
    nb.write_bytes((course.SOLUTIONS / f"{assignment}.ipynb").read_bytes())
    result = grade_json(nb)
    assert result["max_score"] > 0
    assert result["score"] == result["max_score"], json.dumps(result, indent=1)
    assert all(p["message"] == "" for p in result["parts"])
    assert (tmp_path / f"{assignment}.html").read_text().count("</html>") == 1  # the feedback page


def test_exercises_are_generated_from_solutions(tmp_path):
    autograder("release", "--out", str(tmp_path), check=True)
    for assignment in ASSIGNMENTS:
        fresh = (tmp_path / f"{assignment}.ipynb").read_text()
        committed = (course.EXERCISES / f"{assignment}.ipynb").read_text()
        assert fresh == committed, f"exercises/{assignment}.ipynb is stale or hand-edited: run `make exercises`"
    assert sorted(p.stem for p in course.EXERCISES.glob("*.ipynb")) == ASSIGNMENTS


@pytest.mark.parametrize("content, message", [
    (None, "no such file"),
    (b"", "empty"),
    (b"{not json", "not valid JSON"),
    (b'{"hello": "world"}', "JSON without notebook cells"),
    (b"\xff\xfe binary", "not valid JSON"),
])
def test_bad_files_get_one_clear_line(content, message, tmp_path):
    path = tmp_path / "submission.ipynb"
    if content is not None:
        path.write_bytes(content)
    proc = autograder("check", str(path))
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0] and "Traceback" not in proc.stderr, proc.stderr


def test_not_an_exercise(tmp_path):
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("print(1)")])
    path = tmp_path / "mine.ipynb"
    nbformat.write(nb, path)
    proc = autograder("check", str(path))
    assert proc.returncode == 2 and "not a teenygrad exercise" in proc.stderr


def test_notebook_of_another_assignment(tmp_path):
    nb = nbformat.read(course.EXERCISES / f"{ASSIGNMENTS[0]}.ipynb", as_version=4)
    path = tmp_path / "x.ipynb"
    if len(ASSIGNMENTS) > 1:  # a real other exercise, graded as if it were this one
        nbformat.write(nb, path)
        proc = autograder("check", str(path), "--assignment", ASSIGNMENTS[1])
        assert proc.returncode == 2 and f"is assignment {ASSIGNMENTS[0]}, not {ASSIGNMENTS[1]}" in proc.stderr
    nb.metadata["teenygrad"] = {"assignment": "42-astrology"}
    nbformat.write(nb, path)
    proc = autograder("check", str(path))
    assert proc.returncode == 2 and "42-astrology" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1


def test_nbformat3_notebook_is_converted_and_graded(tmp_path):
    nb4 = nbformat.read(course.SOLUTIONS / f"{ASSIGNMENTS[0]}.ipynb", as_version=4)
    nb3 = nbformat.convert(nb4, 3)
    path = tmp_path / "old.ipynb"
    nbformat.write(nb3, path, version=3)
    assert json.loads(path.read_text())["nbformat"] == 3
    result = grade_json(path, feedback=False)
    assert result["score"] == result["max_score"]
    assert not result.get("feedback") and not list(tmp_path.glob("*.html"))  # --no-feedback: no page


def test_table_output_lists_parts_and_total(tmp_path):
    path = tmp_path / "ex.ipynb"
    path.write_bytes((course.EXERCISES / f"{ASSIGNMENTS[0]}.ipynb").read_bytes())
    proc = autograder("check", str(path), check=True)
    assert re.search(r"total\s+0 / \d+", proc.stdout), proc.stdout
    assert "NotImplementedError" in proc.stdout and "Feedback:" in proc.stdout
    assert (tmp_path / "ex.feedback.html").exists()


@pytest.mark.parametrize("fails", [False, True])
def test_graders_started_together_build_the_warm_cache_once(fails, tmp_path, monkeypatch):
    """Two graders asking for the warm numba cache at once: one compiles it, the other waits and uses it
    (the warm-up itself is replaced by a stand-in that takes a moment). A failed warm-up is not handed on."""
    import threading
    import time

    from autograder import caches

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    runs = []

    def compile_kernels(env):
        runs.append(threading.get_ident())
        time.sleep(0.5)
        return "no compiler here" if fails else ""

    monkeypatch.setattr(caches, "_compile_kernels", compile_kernels)
    got = [None, None]
    threads = [threading.Thread(target=lambda i=i: got.__setitem__(i, caches.numba_cache())) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if fails:  # each grader tries in turn and falls back to compiling in its sandboxes; nothing half-built stays
        assert got == [None, None] and len(runs) == 2
        assert [p.name for p in (tmp_path / "teenygrad" / "numba").iterdir() if p.is_dir()] == []
    else:
        assert len(runs) == 1 and got[0] == got[1] and got[0].is_dir()
