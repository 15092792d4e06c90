"""Collecting a class's submissions: folders and platform zips, hostile zips, attempts, resuming."""
from __future__ import annotations

import hashlib
import json
import stat
import zipfile

import pytest

import hostile
from autograder import collect
from conftest import autograder

A = hostile.ASSIGNMENT


def notebook_bytes(name: str = "solved") -> bytes:
    import nbformat
    return nbformat.writes(hostile.solved() if name == "solved" else hostile.exercise()).encode()


def test_student_ids_from_platform_names():
    from pathlib import PurePosixPath as P
    assert collect.owner_of(P("alice/01-regression.ipynb")) == "alice"
    assert collect.owner_of(P("Carol Smith_12345_assignsubmission_file_/01-regression.ipynb")) == "carol-smith"
    assert collect.owner_of(P("doejane_4567_89012_01-regression.ipynb")) == "doejane"
    assert collect.owner_of(P("doejane_LATE_4567_89012_01-regression.ipynb")) == "doejane"
    assert collect.student_id("../../etc") == "etc" and collect.student_id(" Zoë O'Neil ") == "zo-oneil"


def test_hostile_zip_is_read_safely(tmp_path):
    zpath = tmp_path / "export.zip"
    bomb = b"\0" * (collect.MAX_NOTEBOOK_BYTES + 10)
    with zipfile.ZipFile(zpath, "w", compression=zipfile.ZIP_DEFLATED) as z:
        z.writestr("alice/01-regression.ipynb", notebook_bytes())
        z.writestr("Carol Smith_123_assignsubmission_file_/01-regression.ipynb", notebook_bytes("stub"))
        z.writestr("dave_456_789_01-regression.ipynb", notebook_bytes())
        z.writestr("../escape.ipynb", notebook_bytes())
        z.writestr("eve/../../escape2.ipynb", notebook_bytes())
        z.writestr("/abs/escape3.ipynb", notebook_bytes())
        link = zipfile.ZipInfo("mallory/01-regression.ipynb")
        link.external_attr = (stat.S_IFLNK | 0o777) << 16
        z.writestr(link, "/etc/passwd")
        z.writestr("bomb/01-regression.ipynb", bomb)
        z.writestr("frank/notes.txt", "no notebook here")
    root = tmp_path / "course"
    proc = autograder("collect", str(zpath), "-a", A, "--course", str(root), check=True)
    assert sorted(p.name for p in (root / "submitted").iterdir()) == ["alice", "carol-smith", "dave"]
    out = proc.stdout
    assert "3 new submissions" in out
    for expected in ("../escape.ipynb: path escapes", "escape2.ipynb: path escapes", "escape3.ipynb: path escapes",
                     "mallory/01-regression.ipynb: symlink", "bomb/01-regression.ipynb: inflates past",
                     "frank: no .ipynb"):
        assert expected in out, expected
    written = {p.name for p in tmp_path.rglob("*escape*")}
    assert not written  # nothing landed outside (or inside) the course
    # originals are the exact bytes handed in
    original = next((root / "originals" / "alice" / A).iterdir()) / f"{A}.ipynb"
    assert original.read_bytes() == notebook_bytes()


def test_not_a_zip(tmp_path):
    bad = tmp_path / "x.zip"
    bad.write_bytes(b"PK but not really")
    proc = autograder("collect", str(bad), "-a", A, "--course", str(tmp_path / "c"))
    assert proc.returncode == 1 and "not a zip file" in proc.stdout


def test_attempts_are_kept_and_only_changes_are_regraded(tmp_path):
    src, root = tmp_path / "in", tmp_path / "course"
    for name, kind in (("ann", "solved"), ("bob", "stub")):
        (src / name).mkdir(parents=True)
        (src / name / f"{A}.ipynb").write_bytes(notebook_bytes(kind))
    autograder("collect", str(src), "-a", A, "--course", str(root), check=True)
    first = autograder("grade", A, "--course", str(root), "--jobs", "2", check=True)
    assert "graded 2, skipped 0" in first.stdout
    # bob hands in again, fixed; ann hands in the same file again
    (src / "bob" / f"{A}.ipynb").write_bytes(notebook_bytes("solved"))
    again = autograder("collect", str(src), "-a", A, "--course", str(root), check=True)
    assert "1 new submissions, 1 unchanged" in again.stdout
    attempts = sorted((root / "originals" / "bob" / A).iterdir())
    assert len(attempts) == 2  # the first attempt is still there, byte for byte
    assert (attempts[0] / f"{A}.ipynb").read_bytes() == notebook_bytes("stub")
    regrade = autograder("grade", A, "--course", str(root), check=True)
    assert "graded 1, skipped 1" in regrade.stdout and "bob" in regrade.stdout
    result = json.loads((root / "autograded" / "bob" / A / "result.json").read_text())
    assert result["score"] == 7
    assert result["sha256"] == hashlib.sha256(notebook_bytes("solved")).hexdigest()
    forced = autograder("grade", A, "--course", str(root), "--force", "--jobs", "2", check=True)
    assert "graded 2, skipped 0" in forced.stdout


def test_any_sqlalchemy_url_holds_the_gradebook(tmp_path):
    src, root = tmp_path / "in", tmp_path / "course"
    (src / "ann").mkdir(parents=True)
    (src / "ann" / f"{A}.ipynb").write_bytes(notebook_bytes())
    url = f"sqlite:///{tmp_path / 'elsewhere' / 'grades.db'}"
    (tmp_path / "elsewhere").mkdir()
    autograder("collect", str(src), "-a", A, "--course", str(root), check=True)
    autograder("grade", A, "--course", str(root), "--db", url, check=True)
    assert (tmp_path / "elsewhere" / "grades.db").exists() and not (root / "gradebook.db").exists()
    csv_text = autograder("export", A, "--course", str(root), "--db", url, check=True).stdout
    assert "ann,01-regression,7,7" in csv_text


@pytest.mark.parametrize("command", ["check", "collect", "grade", "feedback", "export", "release"])
def test_every_command_has_help(command):
    proc = autograder(command, "--help", check=True)
    assert "usage: python -m autograder " + command in proc.stdout
