"""Collecting a class's submissions: folders and platform zips, hostile zips, attempts, resuming."""
from __future__ import annotations

import hashlib
import json
import stat
import zipfile

import pytest

from autograder import collect

import hostile
from conftest import autograder

A = hostile.ASSIGNMENT


def notebook_bytes(name: str = "solved") -> bytes:
    import nbformat
    return nbformat.writes(hostile.solved() if name == "solved" else hostile.exercise()).encode()


def test_student_ids_from_platform_names():
    from pathlib import PurePosixPath as P
    assert collect.owner_of(P("alice/01-regression.ipynb")) == "alice"
    assert collect.owner_of(P("Carol Smith_12345_assignsubmission_file_/01-regression.ipynb")) == "carol-smith-12345"
    assert collect.owner_of(P("doejane_4567_89012_01-regression.ipynb")) == "doejane-4567"
    assert collect.owner_of(P("doejane_LATE_4567_89012_01-regression.ipynb")) == "doejane-4567"
    assert collect.owner_of(P("李明_77_assignsubmission_file_/x.ipynb")) == "learner-77"
    assert collect.student_id("../../etc") == "etc" and collect.student_id(" Zoë O'Neil ") == "zoe-oneil"


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
    assert sorted(p.name for p in (root / "submitted").iterdir()) == ["alice", "carol-smith-123", "dave-456"]
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


def _different(n: int) -> bytes:
    """A distinct solved notebook for learner n (same answers, its own bytes)."""
    import nbformat
    nb = hostile.solved()
    nb.metadata["learner"] = n
    return nbformat.writes(nb).encode()


def test_namesakes_on_a_platform_are_two_learners(tmp_path):
    """Two participants called Ann Lee (Moodle numbers 101 and 202), and two on Canvas (user ids 7 and 8):
    four learners collected, graded, exported; none lost."""
    zpath = tmp_path / "moodle.zip"
    with zipfile.ZipFile(zpath, "w") as z:
        z.writestr("Ann Lee_101_assignsubmission_file_/01-regression.ipynb", _different(1))
        z.writestr("Ann Lee_202_assignsubmission_file_/01-regression.ipynb", _different(2))
        z.writestr("annlee_7_1001_01-regression.ipynb", _different(3))
        z.writestr("annlee_LATE_8_1002_01-regression.ipynb", _different(4))
    root = tmp_path / "course"
    proc = autograder("collect", str(zpath), "-a", A, "--course", str(root), check=True)
    assert "4 new submissions, 0 unchanged, 0 problems" in proc.stdout
    ids = {"ann-lee-101": 1, "ann-lee-202": 2, "annlee-7": 3, "annlee-8": 4}
    assert sorted(p.name for p in (root / "submitted").iterdir()) == sorted(ids)
    for student, n in ids.items():
        (attempt,) = (root / "originals" / student / A).iterdir()
        (kept,) = attempt.iterdir()  # under the name it was handed in as
        assert kept.read_bytes() == _different(n)
    autograder("grade", A, "--course", str(root), "--jobs", "2", check=True)
    exported = autograder("export", A, "--course", str(root), check=True).stdout
    for student in ids:
        assert f"{student},{A},8,8" in exported


def test_ids_that_collide_are_reported_and_kept(tmp_path):
    """Folders `Ann Lee/` and `ann-lee/` would be one learner: neither is guessed at, both are kept."""
    src, root = tmp_path / "in", tmp_path / "course"
    for n, name in enumerate(["Ann Lee", "ann-lee", "bob"]):
        (src / name).mkdir(parents=True)
        (src / name / f"{A}.ipynb").write_bytes(_different(n))
    proc = autograder("collect", str(src), "-a", A, "--course", str(root), check=True)
    assert "1 new submissions, 0 unchanged, 1 problems" in proc.stdout
    assert "'Ann Lee' and 'ann-lee' would all be learner 'ann-lee'" in proc.stdout
    assert sorted(p.name for p in (root / "submitted").iterdir()) == ["bob"]
    kept = {p.parent.name: p.read_bytes() for p in (root / "unassigned" / A).rglob("*.ipynb")}
    assert kept == {"Ann Lee": _different(0), "ann-lee": _different(1)}
    # once one folder is renamed, both are learners; an id first collected as `ann-lee` stays that person's
    (src / "Ann Lee").rename(src / "Ann Lee-2")
    again = autograder("collect", str(src), "-a", A, "--course", str(root), check=True)
    assert "2 new submissions, 1 unchanged, 0 problems" in again.stdout
    (src / "ann-lee").rename(src / "Ann-Lee")  # a different name that maps onto the same id
    (src / "Ann-Lee" / f"{A}.ipynb").write_bytes(_different(5))
    third = autograder("collect", str(src), "-a", A, "--course", str(root), check=True)
    assert "'Ann-Lee' would be learner 'ann-lee', who was collected before as 'ann-lee'" in third.stdout
    assert (root / "submitted" / "ann-lee" / A / f"{A}.ipynb").read_bytes() == _different(1)


def test_one_size_limit_everywhere(tmp_path):
    """`check` and `collect` refuse the same oversized notebook with the same message."""
    from autograder.notebooks import MAX_NOTEBOOK_BYTES
    big = tmp_path / "in" / "ann" / f"{A}.ipynb"
    big.parent.mkdir(parents=True)
    with open(big, "wb") as f:
        f.truncate(MAX_NOTEBOOK_BYTES + 1)
    checked = autograder("check", str(big))
    assert checked.returncode == 2 and "over the autograder's limit of 64 MB" in checked.stderr
    collected = autograder("collect", str(tmp_path / "in"), "-a", A, "--course", str(tmp_path / "c"))
    assert "over the autograder's limit of 64 MB" in collected.stdout


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
    assert result["score"] == 8
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
    assert "ann,01-regression,8,8" in csv_text


@pytest.mark.parametrize("command", ["check", "capstone", "collect", "grade", "feedback", "export", "release"])
def test_every_command_has_help(command):
    proc = autograder(command, "--help", check=True)
    assert "usage: python -m autograder " + command in proc.stdout
