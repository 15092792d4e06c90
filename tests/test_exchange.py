"""Scale beyond one machine: the nbgrader exchange a JupyterHub course uses, end to end on one machine.

The instructor prepares the course with `python -m autograder setup --exchange`, releases with nbgrader,
a learner fetches, works and submits with nbgrader, the instructor collects with nbgrader and grades with
`python -m autograder grade`. (On a hub the learner's commands run in their own server, as their user.)
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import nbformat

import hostile
from conftest import autograder

A = hostile.ASSIGNMENT


def nbgrader(*args: str, cwd: Path) -> str:
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    proc = subprocess.run(["nbgrader", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout + proc.stderr


def test_release_fetch_submit_collect_grade(tmp_path):
    course, exchange, home = tmp_path / "course", tmp_path / "exchange", tmp_path / "learner"
    exchange.mkdir(mode=0o777)
    home.mkdir()
    autograder("setup", A, "--course", str(course), "--exchange", str(exchange), check=True)
    assert "c.Exchange.root" in (course / "nbgrader_config.py").read_text()
    nbgrader("release_assignment", A, cwd=course)
    shared = ["--course", "teenygrad", f"--Exchange.root={exchange}"]
    nbgrader("fetch_assignment", A, *shared, cwd=home)
    fetched = home / A / f"{A}.ipynb"
    assert "NotImplementedError" in fetched.read_text()  # the learner gets the exercise, not the solution
    nbformat.write(hostile.solved(), fetched)
    nbgrader("submit", A, *shared, cwd=home)
    nbgrader("collect", A, cwd=course)
    learners = [p.name for p in (course / "submitted").iterdir()]
    assert len(learners) == 1
    graded = autograder("grade", A, "--course", str(course), check=True)
    assert f"{learners[0]}" in graded.stdout and "8/8" in graded.stdout
    exported = autograder("export", A, "--course", str(course), check=True).stdout
    assert f"{learners[0]},{A},8,8" in exported


def test_setup_never_silently_overwrites_config(tmp_path):
    course = tmp_path / "course"
    autograder("setup", A, "--course", str(course), check=True)
    (course / "nbgrader_config.py").write_text("# my own edits\n")
    autograder("setup", A, "--course", str(course), "--exchange", str(tmp_path / "x"), check=True)
    backups = list(course.glob("nbgrader_config.*.py"))
    assert len(backups) == 1 and backups[0].read_text() == "# my own edits\n"
