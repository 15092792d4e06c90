"""What the sandboxes start from, prepared once per version of teenygrad's source: a warm numba cache, so a
learner's notebook doesn't recompile all of teenygrad, and the learner's edition each exercise is graded on.

Each sandbox gets a numba cache of its own (nothing one submission compiles can reach another), but
starting it empty would make every submission spend tens of seconds compiling teenygrad's kernels. So,
once per version of teenygrad's source, trusted processes (not sandboxed: only the book's code runs in them)
run every op on small tensors of each dtype with NUMBA_CACHE_DIR pointing at a fresh folder
(`autograder/compile_kernels.py`), and each sandbox starts from a copy of that folder. Only teenygrad's own code
is compiled here, never a solution. Both are kept under ~/.cache/teenygrad/, keyed by the source's digest.
"""
from __future__ import annotations

import compileall
import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from autograder import course


def _key() -> str:
    digest = hashlib.sha256()
    for path in sorted([*(course.REPO / "teenygrad").rglob("*.py"), course.REPO / "autograder" / "compile_kernels.py"]):
        digest.update(path.relative_to(course.REPO).as_posix().encode())
        digest.update(path.read_bytes())
    digest.update(sys.version.encode())
    digest.update(str(course.REPO).encode())  # numba keys cache files by the source folder's path
    return digest.hexdigest()[:16]


def numba_cache(log=None) -> Path | None:
    """The warm cache for the current teenygrad source (built on first use); None if it cannot be built."""
    cache_root = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "teenygrad" / "numba"
    done = cache_root / _key()
    if done.is_dir():
        return done
    cache_root.mkdir(parents=True, exist_ok=True)
    # Graders started together (a class batch beside a self-learner's check, parallel test workers) would each
    # spend minutes compiling the same cache on the same cores; the first builds it, the others wait for it.
    with open(cache_root / f".{_key()}.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file is closed
        if done.is_dir():  # another grader built it while this one waited
            return done
        return _build_numba_cache(cache_root, done, log)


def _build_numba_cache(cache_root: Path, done: Path, log) -> Path | None:
    building = Path(tempfile.mkdtemp(prefix=".warming-", dir=cache_root))
    if log:
        log("compiling teenygrad's kernels once for the sandboxes (cached for later runs)...")
    env = {**os.environ, "NUMBA_CACHE_DIR": str(building), "PYTHONPATH": str(course.REPO)}
    errors = _compile_kernels(env)
    if errors:
        shutil.rmtree(building, ignore_errors=True)
        if log:  # grading still works, just slower: each sandbox compiles what it uses
            log(f"warning: the warm-up failed, so each sandbox compiles teenygrad itself:\n{errors[-2000:]}")
        return None
    try:
        building.rename(done)
    except OSError:  # another grader finished first
        shutil.rmtree(building, ignore_errors=True)
    return done


def _compile_kernels(env: dict) -> str:
    """Run `autograder.compile_kernels` in env; its errors, or "" if it worked. With two cores or more its float32 and
    float64 halves run at once (numba compiles on one core; the cache takes their saves one process at a time,
    see teenygrad.kernels.jit): about a minute instead of two."""
    from teenygrad.kernels.cpu import usable_cores

    halves = [["float32"], ["float64"]] if usable_cores() > 1 else [[]]
    logs = [tempfile.TemporaryFile("w+") for _ in halves]  # not pipes: a full pipe would stall a half
    procs = [subprocess.Popen([sys.executable, "-m", "autograder.compile_kernels", *half], env=env, cwd=course.REPO,
                              stdout=subprocess.DEVNULL, stderr=log) for half, log in zip(halves, logs)]
    errors = []
    try:
        for proc, log in zip(procs, logs):
            try:
                proc.wait(timeout=1800)
                log.seek(0)
                err = log.read()
            except subprocess.TimeoutExpired:
                proc.kill()
                err = "the warm-up took more than 30 minutes"
            if proc.returncode != 0:
                errors.append(err or f"exit status {proc.returncode}")
    finally:
        for proc, log in zip(procs, logs):
            proc.kill()
            log.close()
    return "\n".join(errors)


def learner_edition(assignment: str) -> Path:
    """teenygrad with the pieces of `assignment` stubbed (`teenygrad.edition`), built once per source version.

    The grader binds it, read-only, where the package is in the sandbox: the book's answers to the exercise
    being graded are not on the sandbox's disk at all. Every other exercise's pieces are the book's, so a part
    may build on earlier chapters. Unchanged files keep their times, so the warm numba cache stays valid."""
    from teenygrad import edition

    cache_root = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "teenygrad" / "editions"
    done = cache_root / _key() / assignment / "teenygrad"
    if done.is_dir():
        return done
    cache_root.mkdir(parents=True, exist_ok=True)
    building = Path(tempfile.mkdtemp(prefix=".building-", dir=cache_root))
    package = edition.build_learner(building, frozenset([assignment]), package=course.REPO / "teenygrad")
    compileall.compile_dir(package, quiet=1)  # the sandbox's package folder is read-only: no .pyc written there
    os.chmod(building, 0o755)
    done.parent.mkdir(parents=True, exist_ok=True)
    try:
        package.rename(done)
    except OSError:  # another grader finished first
        pass
    shutil.rmtree(building, ignore_errors=True)
    return done
