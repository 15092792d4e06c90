"""Compiled kernels are cached on disk, even when the package folder is read-only.

Run as root, the autograder's sandbox gives a real read-only mount of teenygrad (root ignores file
permissions, so chmod could not). With no NUMBA_CACHE_DIR, numba cannot write `__pycache__` beside the
source and falls back to the per-user cache folder under HOME; the second process must find everything
there and compile nothing.
"""
from __future__ import annotations

import json
import os
import shutil
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


MODULE = """
from teenygrad.kernels.jit import kernel


@kernel
def twice(x):
    out = x.copy()
    for i in range(x.size):
        out[i] = x[i] * 2
    return out
"""

CALLS = """
import json, sys
import numpy as np
sys.path.insert(0, sys.argv[1])
import twice_kernel as m
values = [m.twice(np.arange(3, dtype=d)).tolist() for d in sys.argv[2].split(",")]
print(json.dumps({"values": values, "misses": sum(m.twice.stats.cache_misses.values())}))
"""


def _calls(folder: Path, dtypes: str) -> dict:
    env = {**os.environ, "PYTHONPATH": str(course.REPO)}
    env.pop("NUMBA_CACHE_DIR", None)  # the cache beside the module, in folder/__pycache__
    proc = subprocess.run([sys.executable, "-c", CALLS, str(folder), dtypes], capture_output=True, text=True,
                          env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("serial", [True, False])
def test_two_processes_saving_one_kernel_keep_both_versions(serial, tmp_path, monkeypatch):
    """Two savers of one function's index (as two processes compiling different versions at once), each slowed
    between reading the index and writing it, so numba's own save would give both versions one data file."""
    import threading
    import time

    from numba.core.caching import IndexDataCacheFile

    from teenygrad.kernels import jit

    kind = jit._SerialIndex if serial else IndexDataCacheFile
    savers = [kind(str(tmp_path), "k", "stamp") for _ in range(2)]
    read = kind._load_index

    def slow_read(self):
        index = read(self)
        time.sleep(0.3)
        return index

    monkeypatch.setattr(kind, "_load_index", slow_read)
    threads = [threading.Thread(target=s.save, args=(f"key{i}", f"code{i}")) for i, s in enumerate(savers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    monkeypatch.setattr(kind, "_load_index", read)
    kept = {key: savers[0].load(key) for key in ("key0", "key1")}
    if serial:
        assert kept == {"key0": "code0", "key1": "code1"}
    else:  # numba alone: one version lost or, worse, pointing at the other's code
        assert kept != {"key0": "code0", "key1": "code1"}


def test_a_cached_version_for_other_types_is_compiled_again(tmp_path):
    """An index that points a signature at another version's machine code (what the race above leaves) must not
    run that code: numba alone ran the int64 version on a float64 array and returned garbage."""
    import pickle

    (tmp_path / "twice_kernel.py").write_text(MODULE)
    assert _calls(tmp_path, "float64,int64")["values"] == [[0, 2, 4], [0, 2, 4]]
    [index] = (tmp_path / "__pycache__").glob("*.nbi")
    with open(index, "rb") as f:
        version, stamp_and_entries = pickle.load(f), f.read()
    stamp, entries = pickle.loads(stamp_and_entries)
    (a, name_a), (b, name_b) = entries.items()
    entries = {a: name_b, b: name_a}  # swapped
    with open(index, "wb") as f:
        pickle.dump(version, f, protocol=-1)
        f.write(pickle.dumps((stamp, entries)))
    again = _calls(tmp_path, "float64,int64")
    assert again["values"] == [[0, 2, 4], [0, 2, 4]] and again["misses"] == 2  # both compiled again, right
    assert _calls(tmp_path, "float64,int64")["misses"] == 0  # ... and saved over the wrong entries


CALLER = """
from teenygrad.kernels.callee import scale
from teenygrad.kernels.jit import kernel


@kernel
def use(x):
    return scale(x) + 1.0
"""

RUN_CALLER = """
import json, sys
sys.path.insert(0, sys.argv[1])
import caller
print(json.dumps({"value": caller.use(1.0), "misses": sum(caller.use.stats.cache_misses.values())}))
"""


def test_editing_a_kernel_recompiles_the_kernels_that_call_it(tmp_path):
    """A cached kernel holds the machine code of the kernels it calls, and numba checks only its own file: after an
    edit of a kernel in teenygrad/kernels, a kernel elsewhere that calls it (matmul_views calling the micro-kernel,
    a compiled program calling exp32) loaded its old code, and computed what the edit had changed."""
    package = tmp_path / "copy" / "teenygrad"
    shutil.copytree(course.REPO / "teenygrad", package, ignore=shutil.ignore_patterns("__pycache__", "data"))
    callee = package / "kernels" / "callee.py"
    (tmp_path / "caller.py").write_text(CALLER)
    env = {**os.environ, "PYTHONPATH": str(package.parent)}
    env.pop("NUMBA_CACHE_DIR", None)  # caches beside the sources, in the copy and in tmp_path

    def run() -> dict:
        proc = subprocess.run([sys.executable, "-c", RUN_CALLER, str(tmp_path)], capture_output=True, text=True,
                              env=env, timeout=300, cwd=tmp_path)  # not beside the real package
        assert proc.returncode == 0, proc.stderr[-2000:]
        return json.loads(proc.stdout.strip().splitlines()[-1])

    callee.write_text("from teenygrad.kernels.jit import kernel\n\n\n@kernel\ndef scale(x):\n    return 2.0 * x\n")
    assert run() == {"value": 3.0, "misses": 1}
    assert run() == {"value": 3.0, "misses": 0}  # cached
    callee.write_text("from teenygrad.kernels.jit import kernel\n\n\n@kernel\ndef scale(x):\n    return 5.0 * x\n")
    assert run() == {"value": 6.0, "misses": 1}  # the caller, unchanged, compiled again with the new callee
    assert run() == {"value": 6.0, "misses": 0}


def test_the_learners_edition_finds_the_books_warm_cache(tmp_path):
    """The grader's sandboxes start from a numba cache compiled from the book's package but run on the learner's
    edition (every exercise's pieces stubbed): the kernels' digest in the caches' stamp must be the same for both,
    or every kernel compiles again in every sandbox."""
    from teenygrad import edition
    from teenygrad.kernels.jit import kernels_digest

    learner = edition.build_learner(tmp_path, package=course.REPO / "teenygrad")
    stubbed = [p.name for p in (learner / "kernels").glob("*.py")
               if p.read_bytes() != (course.REPO / "teenygrad" / "kernels" / p.name).read_bytes()]
    assert stubbed  # the edition does differ in teenygrad/kernels (exercises 2 and 3)
    assert kernels_digest(learner / "kernels") == kernels_digest(course.REPO / "teenygrad" / "kernels")


NESTED = """
from teenygrad.kernels.jit import kernel


def piece(x):
    # an exercise's piece: its kernels are defined inside it, and one calls the other
    @kernel
    def inner(v):
        return v * FACTOR

    @kernel
    def outer(v):
        return inner(v) + 1.0
    return outer(x), outer
"""

RUN_NESTED = """
import json, sys
sys.path.insert(0, sys.argv[1])
import nested_kernel as m
value, outer = m.piece(1.0)
print(json.dumps({"value": value, "misses": sum(outer.stats.cache_misses.values())}))
"""


def test_a_kernel_calling_a_kernel_defined_beside_it_is_loaded_from_the_cache(tmp_path):
    """A kernel defined inside a function that calls another defined there (attention's backward: its parallel
    version calls its serial one) closes over that kernel. numba keyed its cache on the pickled closure, which
    holds an id new in every process, so every training run compiled attention's backward again (7 s). Loaded from
    the cache now; and an edit of the inner kernel still compiles the outer one again."""
    env = {**os.environ, "PYTHONPATH": str(course.REPO)}
    env.pop("NUMBA_CACHE_DIR", None)  # the cache beside the module, in tmp_path/__pycache__

    def run() -> dict:
        proc = subprocess.run([sys.executable, "-c", RUN_NESTED, str(tmp_path)], capture_output=True, text=True,
                              env=env, timeout=300)
        assert proc.returncode == 0, proc.stderr[-2000:]
        return json.loads(proc.stdout.strip().splitlines()[-1])

    module = tmp_path / "nested_kernel.py"
    module.write_text(NESTED.replace("FACTOR", "2.0"))
    assert run() == {"value": 3.0, "misses": 1}
    assert run() == {"value": 3.0, "misses": 0}  # loaded
    module.write_text(NESTED.replace("FACTOR", "5.0"))
    assert run() == {"value": 6.0, "misses": 1}
    assert run() == {"value": 6.0, "misses": 0}
