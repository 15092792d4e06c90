"""Issue: bad and hostile submissions. A whole class of crafted submissions (tests/hostile.py) is collected
and graded in one batch with 2 jobs, as an instructor would; then every outcome, the gradebook and the
machine are checked."""
from __future__ import annotations

import csv
import glob
import io
import json
import os
import subprocess

import nbformat
import pytest

import hostile
from conftest import autograder

A = hostile.ASSIGNMENT


@pytest.fixture(scope="module")
def graded_class(tmp_path_factory):
    root = tmp_path_factory.mktemp("course")
    src = tmp_path_factory.mktemp("submissions")
    for name, data in hostile.notebooks(root).items():
        (src / name).mkdir()
        (src / name / f"{A}.ipynb").write_bytes(data)
    collected = autograder("collect", str(src), "-a", A, "--course", str(root), check=True)
    # numba-loop spins until the wall limit (a compiled loop ignores the cell timeout's interrupt): 45 s keeps that
    # short; an honest submission of this class takes about 5 s
    graded = autograder("grade", A, "--course", str(root), "--jobs", "2", "--timeout", "45", "--cell-timeout", "15",
                        check=True)
    return root, collected, graded


def result_of(root, name) -> dict:
    return json.loads((root / "autograded" / name / A / "result.json").read_text())


@pytest.mark.parametrize("name", sorted(hostile.EXPECTED))
def test_each_submission_gets_a_fair_recorded_outcome(graded_class, name):
    root, _, _ = graded_class
    result = result_of(root, name)
    score, text = hostile.EXPECTED[name]
    reasons = " | ".join([result["error"]] + [p["message"] for p in result["parts"]])
    assert result["score"] == score, reasons
    assert result["max_score"] == 8
    for part in result["parts"]:  # every lost point says why
        assert part["score"] == part["max_score"] or part["message"], part
    assert text in reasons


def test_batch_summary_names_everyone(graded_class):
    _, collected, graded = graded_class
    assert f"{len(hostile.EXPECTED)} new submissions" in collected.stdout
    assert f"graded {len(hostile.EXPECTED)}, skipped 0" in graded.stdout
    for name in hostile.EXPECTED:
        assert name in graded.stdout


def test_gradebook_is_consistent(graded_class):
    from nbgrader.api import Gradebook

    root, _, _ = graded_class
    with Gradebook(f"sqlite:///{root / 'gradebook.db'}") as gb:
        assert sorted(s.id for s in gb.students) == sorted(hostile.EXPECTED)
        for name in hostile.EXPECTED:
            sub = gb.find_submission(A, name)
            assert sub.score == result_of(root, name)["score"] and sub.max_score == 8, name
            assert all(g.manual_score is None for nb in sub.notebooks for g in nb.grades)  # nobody wrote 100s


def test_nothing_leaked_or_written(graded_class):
    root, _, _ = graded_class
    def outputs(name):
        nb = json.loads((root / "autograded" / name / A / f"{A}.ipynb").read_text())
        return json.dumps([c.get("outputs", []) for c in nb["cells"]])

    for name in hostile.EXPECTED:
        assert "LEAKED" not in outputs(name), name
    assert "blocked: FileNotFoundError" in outputs("read-secrets")
    assert "WROTE GRADEBOOK" not in outputs("write-gradebook")
    # its other "writes" landed in the sandbox's private /tmp; the real files are untouched
    assert not (root / "feedback" / "honest-full" / "x.html").exists()
    assert result_of(root, "honest-full")["score"] == 8


def test_outputs_are_capped(graded_class):
    root, _, _ = graded_class
    for name in ("big-output", "huge-image"):
        assert (root / "autograded" / name / A / f"{A}.ipynb").stat().st_size < 2_000_000
        assert "cut" in " ".join(result_of(root, name)["notes"])


def test_no_process_or_cgroup_outlives_the_batch(graded_class):
    root, _, _ = graded_class
    boxes = [result_of(root, name)["sandbox"] for name in hostile.EXPECTED]
    boxes = [b.split(":") for b in boxes if b]  # (id, uid) of every sandbox this batch ran
    assert len(boxes) >= len(hostile.EXPECTED) - 3  # all but the files that were never notebooks
    # zombies are already dead; ps lists them until their (reaped-by-init) parent collects them
    live = subprocess.run(["ps", "-eo", "uid=,stat="], capture_output=True, text=True).stdout.split("\n")
    live_uids = {int(row.split()[0]) for row in live if row.strip() and not row.split()[1].startswith("Z")}
    assert not live_uids & {int(uid) for _, uid in boxes}
    assert not [g for box_id, _ in boxes for g in glob.glob(f"/sys/fs/cgroup/*/teenygrad-{box_id}")]


def test_no_ipc_object_or_disk_left_behind(graded_class):
    """sysv-ipc made 4 x 64 MB of shared memory and a queue; disk-hog filled its work folder: none of it stays."""
    from autograder import sandbox

    root, _, _ = graded_class
    outputs = (root / "autograded" / "sysv-ipc" / A / f"{A}.ipynb").read_text()
    assert "IPC made [" in outputs  # it did make them: the test below could fail
    uids = {int(result_of(root, name)["sandbox"].split(":")[1]) for name in hostile.EXPECTED
            if result_of(root, name)["sandbox"]}
    assert not [obj for uid in uids for obj in sandbox._ipc_objects(uid)]
    hog = result_of(root, "disk-hog")
    assert "stopped after" in (root / "autograded" / "disk-hog" / A / f"{A}.ipynb").read_text()  # writes failed
    assert "disk space it may use" in " ".join(hog["notes"])
    mounts = open("/proc/self/mounts").read()
    assert "teenygrad-private" not in mounts
    assert not glob.glob("/tmp/teenygrad-private-*/sandbox/work/hog*.bin")


def test_feedback_export_and_resume(graded_class):
    root, _, _ = graded_class
    out = autograder("feedback", A, "--course", str(root), check=True)
    assert f"{len(hostile.EXPECTED)} feedback pages" in out.stdout
    page = (root / "feedback" / "os-exit" / A / f"{A}.html").read_text()
    assert "exited" in page
    exported = autograder("export", A, "--course", str(root), check=True).stdout
    rows = {r["student"]: r for r in csv.DictReader(io.StringIO(exported))}
    assert len(rows) == len(hostile.EXPECTED)
    for name, (score, _) in hostile.EXPECTED.items():
        assert float(rows[name]["score"]) == score
    assert "limit" in rows["numba-loop"]["problems"]
    assert "disk space" in rows["disk-hog"]["problems"]
    again = autograder("grade", A, "--course", str(root), check=True)
    assert f"graded 0, skipped {len(hostile.EXPECTED)}" in again.stdout


@pytest.mark.skipif(os.geteuid() != 0, reason="the sweep removes a sandbox uid's IPC objects only as root")
def test_sweep_removes_the_sandbox_uids_ipc_objects():
    """Objects made outside an IPC namespace (where unsharing it failed) are removed by the end-of-run sweep,
    and only those of the sandbox's uid."""
    import ctypes

    from autograder import sandbox

    libc = ctypes.CDLL(None, use_errno=True)
    uid, mine = 123457, libc.shmget(0, 4096, 0o1600)  # a segment of ours (root), which must survive
    pid = os.fork()
    if pid == 0:  # as the sandbox uid: a shared memory block, a message queue and a semaphore set
        os.setgid(uid)
        os.setuid(uid)
        ok = min(libc.shmget(0, 2**20, 0o1600), libc.msgget(0, 0o1600), libc.semget(0, 1, 0o1600)) >= 0
        os._exit(0 if ok else 1)
    assert os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == 0
    try:
        assert sorted(kind for kind, _ in sandbox._ipc_objects(uid)) == ["msg", "sem", "shm"]
        assert sandbox.sweep({"uid": uid, "id": "test-sweep"}) == 3
        assert sandbox._ipc_objects(uid) == []
        assert ("shm", mine) in sandbox._ipc_objects(0)
    finally:
        libc.shmctl(mine, 0, None)


@pytest.fixture(scope="module")
def graded_kernels(tmp_path_factory):
    """Exercise 3 solved but with a slow tile kernel behind a faked clock, graded as an instructor would."""
    root = tmp_path_factory.mktemp("kernels-course")
    src = tmp_path_factory.mktemp("kernels-submissions")
    for name, data in hostile.kernel_notebooks().items():
        (src / name).mkdir()
        (src / name / f"{hostile.KERNELS}.ipynb").write_bytes(data)
    autograder("collect", str(src), "-a", hostile.KERNELS, "--course", str(root), check=True)
    autograder("grade", hostile.KERNELS, "--course", str(root), "--jobs", "2", check=True)
    return root


@pytest.mark.parametrize("name", sorted(hostile.KERNEL_EXPECTED))
def test_a_faked_clock_earns_nothing(graded_kernels, name):
    result = json.loads((graded_kernels / "autograded" / name / hostile.KERNELS / "result.json").read_text())
    score, text = hostile.KERNEL_EXPECTED[name]
    speed = next(p for p in result["parts"] if p["name"] == "matmul_tile")
    assert result["score"] == score and result["max_score"] == 10, result["parts"]
    assert text in speed["message"]
    if name == "kernels-fake-clock":  # its own visible test believed the fake clock
        outputs = (graded_kernels / "autograded" / name / hostile.KERNELS / f"{hostile.KERNELS}.ipynb").read_text()
        assert "matmul_tile: visible tests passed" in outputs


def test_a_grading_process_that_fails_or_hangs_costs_only_its_submission(tmp_path):
    """Each submission is graded in a process of its own (forked from the fork server): one that fails is
    recorded with the last line it wrote, one that runs past its time is killed; either way every part of that
    submission scores zero with the reason, and the next one, from the same server, grades as usual."""
    from autograder import caches, course, fork_server
    from autograder.grade_submission import Job, grade
    from autograder.sandbox import Limits

    fork_server.start()
    template, jobs = course.template(A), tmp_path / "jobs"
    folder = tmp_path / "a-folder.ipynb"
    folder.mkdir()  # reading it fails inside the grading process
    stuck = tmp_path / "a-pipe.ipynb"
    os.mkfifo(stuck)  # reading it waits forever for a writer
    solved = tmp_path / "solved.ipynb"
    solved.write_text(nbformat.writes(hostile.solved()))

    failed, _ = grade(Job(template, A, "fails", folder, Limits()), jobs)
    assert failed.error.startswith("the grader failed (exit 1): IsADirectoryError"), failed.error
    hung, _ = grade(Job(template, A, "hangs", stuck, Limits(wall_seconds=-297)), jobs)  # 3 s
    assert hung.error == "the grader did not finish in time"
    for result in (failed, hung):
        assert result.score == 0 and result.parts and all(p.message == result.error for p in result.parts)
    fine, _ = grade(Job(template, A, "fine", solved, Limits(), caches.numba_cache(), caches.learner_edition(A)),
                    jobs)
    assert (fine.score, fine.max_score, fine.error) == (8, 8, "")


def test_without_root_the_disk_quota_is_watched(tmp_path):
    """The non-root fallback (no tmpfs): the wrapper adds up the work folder and stops the kernel past the
    quota, and says so in its status file."""
    import sys

    import conftest

    work = tmp_path / "work"
    work.mkdir()
    spec = {"id": "quota-test", "uid": os.getuid(), "isolate": False, "work_dir": str(work), "home": str(work),
            "read_only": [], "env": {}, "wall_seconds": 60, "address_space_bytes": 4 * 2**30,
            "memory_bytes": 4 * 2**30, "max_processes": 64, "file_bytes": 2**30,
            "status_file": str(tmp_path / "status.json"), "disk_bytes": 20 * 2**20, "disk_mounted": False}
    hog = ("import time\nfor i in range(100):\n    open(f'hog{i}', 'wb').write(b'x' * 2**20)\n    time.sleep(0.02)\n"
           "time.sleep(60)")
    (tmp_path / "spec.json").write_text(json.dumps(spec))
    proc = subprocess.run([sys.executable, "-m", "autograder.sandbox", str(tmp_path / "spec.json"), "--",
                           sys.executable, "-c", hog], cwd=conftest.REPO, timeout=120)
    assert proc.returncode == 1
    status = json.loads((tmp_path / "status.json").read_text())
    assert status["outcome"] == "disk" and status["disk_full"] and "watched quota" in status["isolation"]
    assert status["seconds"] < 30 and len(list(work.glob("hog*"))) < 60


@pytest.mark.parametrize("budget, jobs", [(2, 1), (2, 2), (3, 2), (1, 4)])
def test_submissions_graded_at_once_share_the_threads(budget, jobs, tmp_path, monkeypatch):
    """A grader given NUMBA_NUM_THREADS (else every core it may use) runs each of `jobs` sandboxes at once on its
    share: the kernel in a sandbox sees numba and OpenMP with that many threads, never fewer than one."""
    import sys

    from autograder import sandbox

    import conftest

    monkeypatch.setenv("NUMBA_NUM_THREADS", str(budget))
    assert sandbox.Limits().threads == budget
    sandbox.prepare(tmp_path, {}, sandbox.Limits().shared_by(jobs), kernel=False)
    spec = json.loads((tmp_path / "sandbox" / "spec.json").read_text())
    spec["status_file"] = str(tmp_path / "status.json")
    (tmp_path / "spec.json").write_text(json.dumps(spec))
    probe = "import os, numba; print(numba.get_num_threads(), os.environ['OMP_NUM_THREADS'])"
    proc = subprocess.run([sys.executable, "-m", "autograder.sandbox", str(tmp_path / "spec.json"), "--",
                           sys.executable, "-c", probe], cwd=conftest.REPO, capture_output=True, text=True, timeout=120)
    share = max(1, budget // jobs)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == [str(share), str(share)]
    monkeypatch.delenv("NUMBA_NUM_THREADS")
    assert sandbox.Limits().threads == len(os.sched_getaffinity(0))
