"""A PostgreSQL gradebook (`--db postgresql+psycopg2://...`), on a throwaway server when one is installed.

Runs where Debian's `postgresql` package is installed and we are root (to start the server as the
`postgres` user); skipped elsewhere, saying why.
"""
from __future__ import annotations

import glob
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import nbformat
import pytest

import hostile
from conftest import autograder

A = hostile.ASSIGNMENT
BIN = sorted(glob.glob("/usr/lib/postgresql/*/bin"))


@pytest.fixture
def postgres():
    if not BIN or os.geteuid() != 0 or not shutil.which("runuser"):
        pytest.skip("needs Debian's postgresql package and root (apt-get install postgresql)")
    data = Path(tempfile.mkdtemp(prefix="teenygrad-pg-"))  # pytest's own tmp is root-only; postgres needs in
    shutil.chown(data, "postgres")
    port = 55000 + os.getpid() % 400

    def as_postgres(*cmd):
        subprocess.run(["runuser", "-u", "postgres", "--", *cmd], check=True, capture_output=True, timeout=120)

    as_postgres(f"{BIN[-1]}/initdb", "-D", str(data / "db"), "-A", "trust", "-U", "postgres")
    as_postgres(f"{BIN[-1]}/pg_ctl", "-D", str(data / "db"), "-l", str(data / "log"), "-w", "-o",
                f"-k {data} -p {port} -c listen_addresses=127.0.0.1", "start")
    try:
        as_postgres(f"{BIN[-1]}/createdb", "-h", str(data), "-p", str(port), "course")
        yield f"postgresql+psycopg2://postgres@127.0.0.1:{port}/course"
    finally:
        as_postgres(f"{BIN[-1]}/pg_ctl", "-D", str(data / "db"), "-m", "immediate", "stop")
        shutil.rmtree(data, ignore_errors=True)


def test_grade_a_class_into_postgres(postgres, tmp_path):
    src, root = tmp_path / "in", tmp_path / "course"
    for name, parts in (("ann", hostile.PARTS), ("bob", ["ridge_gradient"])):
        (src / name).mkdir(parents=True)
        nbformat.write(hostile.solved(parts), src / name / f"{A}.ipynb")
    autograder("setup", A, "--course", str(root), "--db", postgres, check=True)
    autograder("collect", str(src), "-a", A, "--course", str(root), check=True)
    autograder("grade", A, "--course", str(root), "--db", postgres, "--jobs", "2", check=True)
    assert not (root / "gradebook.db").exists()  # the grades live in PostgreSQL
    rows = autograder("export", A, "--course", str(root), "--db", postgres, check=True).stdout
    assert f"ann,{A},8,8" in rows and f"bob,{A},2,8" in rows
    pages = autograder("feedback", A, "--course", str(root), "--db", postgres, check=True).stdout
    assert "2 feedback pages" in pages


def test_unreachable_database_is_one_clear_line(tmp_path):
    proc = autograder("export", "--course", str(tmp_path), "--db", "postgresql+psycopg2://nobody@127.0.0.1:1/x")
    assert proc.returncode == 2 and proc.stderr.startswith("error: cannot use the gradebook database")
    assert "Traceback" not in proc.stderr and proc.stdout == ""
