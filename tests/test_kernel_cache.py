"""Compiled kernels are cached on disk, even when the package folder is read-only.

Run as root, the autograder's sandbox gives a real read-only mount of teenygrad (root ignores file
permissions, so chmod could not). With no NUMBA_CACHE_DIR, numba cannot write `__pycache__` beside the
source and falls back to the per-user cache folder under HOME; the second process must find everything
there and compile nothing.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from autograder import course

SCRIPT = """
import json, teenygrad as tg
from teenygrad.kernels import elementwise, reduce
x = tg.randn(5, 7)
(x + x).sum(axis=0); x.exp()
misses = sum(sum(k.stats.cache_misses.values()) for k in (elementwise.add, elementwise.exp))
print(json.dumps({"misses": misses, "where": tg.__file__}))
"""


@pytest.mark.skipif(os.geteuid() != 0, reason="a read-only mount needs root (the sandbox)")
def test_read_only_package_falls_back_to_a_user_cache(tmp_path):
    work = tmp_path / "work"
    (work / "home").mkdir(parents=True)
    (work / "run.py").write_text(SCRIPT)
    uid = 150000 + os.getpid() % 1000
    for p in (work, work / "home", work / "run.py"):
        os.chown(p, uid, uid)
    os.chmod(tmp_path, 0o711)
    python_home = str(Path(os.path.realpath(sys.executable)).parent.parent)

    def run(i: int) -> dict:
        spec = {"id": f"cache-{os.getpid()}-{i}", "uid": uid, "work_dir": str(work), "home": str(work / "home"),
                "read_only": ["/usr", "/lib", "/lib64", "/bin", "/etc", "/sys", python_home, sys.prefix,
                              str(course.REPO / "teenygrad")],
                "env": {"PYTHONPATH": str(course.REPO)}, "wall_seconds": 600, "address_space_bytes": 8 * 2**30,
                "memory_bytes": 8 * 2**30, "max_processes": 64, "file_bytes": 2**30,
                "status_file": str(tmp_path / "status.json")}
        (tmp_path / "spec.json").write_text(json.dumps(spec))
        proc = subprocess.run([sys.executable, "-m", "autograder.sandbox", str(tmp_path / "spec.json"), "--",
                               sys.executable, str(work / "run.py")], capture_output=True, text=True, timeout=900)
        assert proc.returncode == 0, proc.stderr[-2000:]
        return json.loads(proc.stdout.strip().splitlines()[-1])

    first, second = run(1), run(2)
    assert first["where"].startswith(str(course.REPO))
    assert first["misses"] > 0  # compiled in the first process (nothing in the sandbox's new HOME yet)
    assert second["misses"] == 0  # ... and loaded from the fallback cache in the second
    assert list((work / "home").rglob("*.nbi"))  # numba's index files landed in the user cache
