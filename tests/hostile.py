"""A battery of crafted submissions for exercise 1, each with the outcome a fair grader gives.

Each fixture is built from the released exercise (stubs) or from it solved with the solution code, then
mutated the way a careless or hostile learner might. `EXPECTED[name] = (score, text)`: the exact score
out of 8, and a piece of text the instructor must see in the reasons ("" where any reason will do; every
lost point must come with some reason).
Points: ridge_gradient 2, closed_form 2, gradient_descent 1, standardize 1, cross_validation 2.
"""
from __future__ import annotations

import base64
import copy

import nbformat

from autograder import course

ASSIGNMENT = "01-regression"
PARTS = ["ridge_gradient", "closed_form", "gradient_descent", "standardize", "cross_validation"]
# functions with the right shapes and the wrong values
WRONG = {
    "ridge_gradient": "def ridge_gradient(X, y, w, lam):\n    return np.zeros(len(w))",
    "closed_form": "def solve_spd(A, b):\n    return np.zeros(len(b))\n\n\ndef fit_ridge(X, y, lam):\n    return np.zeros(X.shape[1])",
    "gradient_descent": "def gradient_descent(loss, grad, w0, lr, max_steps=10_000, tol=1e-6):\n"
                        "    return np.array(w0, dtype=float), np.array([loss(w0)])",
    "standardize": "def standardize(X_train, X_test, eps=1e-12):\n    return X_train, X_test, X_train.mean(0), X_train.std(0)\n\n\n"
                   "def unstandardize(w, mean, std, y_mean=0.0, y_std=1.0):\n    return np.array(w, dtype=float)",
    "cross_validation": "def kfold_rmse(X, y, k, fit, seed=0):\n    return np.zeros(k)\n\n\n"
                        "def choose_lambda(X, y, lams, k, fit, seed=0):\n    return 0.0, np.zeros((len(lams), k))",
}


def _gid(cell):
    return cell.metadata.get("nbgrader", {}).get("grade_id")


def exercise(assignment: str = ASSIGNMENT) -> nbformat.NotebookNode:
    return nbformat.read(course.EXERCISES / f"{assignment}.ipynb", as_version=4)


def solved(parts=PARTS, assignment: str = ASSIGNMENT) -> nbformat.NotebookNode:
    """The exercise with the given parts filled in as a learner would (solution code, no markers)."""
    answers = {}
    for cell in nbformat.read(course.SOLUTIONS / f"{assignment}.ipynb", as_version=4).cells:
        if cell.metadata.get("nbgrader", {}).get("solution"):
            answers[_gid(cell)] = "\n".join(line for line in cell.source.splitlines() if "### " not in line)
    nb = exercise(assignment)
    for cell in nb.cells:
        if _gid(cell) in parts:
            cell.source = answers[_gid(cell)]
    return nb


def wrong(nb):
    for cell in nb.cells:
        if _gid(cell) in WRONG:
            cell.source = WRONG[_gid(cell)]
    return nb


def insert_after(nb, grade_id, code):
    """A learner's own cell right after the cell `grade_id` (None: after the setup cell)."""
    index = next(i for i, c in enumerate(nb.cells) if _gid(c) == (grade_id or "setup"))
    nb.cells.insert(index + 1, nbformat.v4.new_code_cell(code))
    return nb


def _after_each_part(nb, code):
    for part in PARTS:
        insert_after(nb, part, code)
    return nb


def with_tests(nb, fn):
    for cell in nb.cells:
        if (_gid(cell) or "").startswith("test_"):
            fn(cell)
    return nb


def _edit(cell):
    cell.source = "pass  # tests? what tests"


def _tag(cell):
    cell.metadata.setdefault("tags", []).append("skip-execution")


def _retype(cell):
    cell.metadata.pop("nbgrader", None)


SWALLOW_ERRORS = ("ip = get_ipython()\nip.set_custom_exc((BaseException,), lambda *a, **k: None)\n"
                  "import sys\nsys.excepthook = lambda *a: None")
PATCH_NUMPY = ("import numpy, numpy.testing\nnumpy.allclose = lambda *a, **k: True\nnumpy.isclose = lambda *a, **k: True\n"
               "numpy.testing.assert_allclose = lambda *a, **k: None\nnp = numpy")
PATCH_EQ = ("class Yes(float):\n    __eq__ = lambda self, other: True\n    __le__ = __ge__ = __lt__ = __gt__ = __eq__\n"
            "    __abs__ = lambda self: Yes(0.0)\n"
            "import numpy\nnumpy.allclose = lambda *a, **k: True\nnumpy.isclose = lambda *a, **k: True\n"
            "def kfold_rmse(X, y, k, fit, seed=0):\n    return [Yes(0.0)] * k")
PATCH_BUILTINS = ("import builtins, teenygrad.grading\n"
                  "builtins.isinstance = lambda *a: True\nbuiltins.AssertionError = Warning\n"
                  "def report(part, fn):\n"
                  "    import os, glob, numpy\n"
                  "    root = os.environ.get('TEENYGRAD_GRADING_DIR', '')\n"
                  "    for case in glob.glob(f'{root}/cases/{part}/*.npz'):\n"
                  "        out = case.replace('/cases/', '/results/')\n"
                  "        os.makedirs(os.path.dirname(out), exist_ok=True)\n"
                  "        numpy.savez(out, out0=numpy.zeros(3))\n"
                  "teenygrad.grading.report = report")


def read_secrets(course_root) -> str:
    """Try every secret there is; if any is readable, use it to define the functions (a cheat)."""
    targets = [str(course.SOLUTIONS / f"{ASSIGNMENT}.ipynb"), str(course.REPO / "autograder" / "judges" / "regression.py"),
               str(course_root / "gradebook.db"), str(course_root / "source" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb"),
               str(course.REPO / ".git" / "HEAD")]
    return ("import json\nleaked = []\n"
            f"for path in {targets!r}:\n"
            "    try:\n        data = open(path, 'rb').read()\n        leaked.append(path)\n"
            "        print('LEAKED', path)\n"
            "        if path.endswith('.ipynb'):\n"
            "            for c in json.loads(data)['cells']:\n"
            "                if 'BEGIN SOLUTION' in ''.join(c['source']): exec(''.join(c['source']), globals())\n"
            "    except OSError as e:\n        print('blocked:', type(e).__name__)\n")


def write_gradebook(course_root) -> str:
    return ("import sqlite3, os\n"
            "for attempt in range(1):\n"
            "    try:\n"
            f"        db = sqlite3.connect({str(course_root / 'gradebook.db')!r}, timeout=1)\n"
            "        db.execute('update grade set manual_score = 100'); db.commit(); print('WROTE GRADEBOOK')\n"
            "    except Exception as e: print('blocked:', type(e).__name__)\n"
            f"for path in [{str(course_root / 'feedback' / 'honest-full' / 'x.html')!r}, "
            f"{str(course_root / 'autograded' / 'honest-full' / ASSIGNMENT / 'result.json')!r}]:\n"
            "    try:\n        os.makedirs(os.path.dirname(path), exist_ok=True)\n"
            "        open(path, 'w').write('{\"score\": 0}'); print('WROTE', path)\n"
            "    except OSError as e: print('blocked:', type(e).__name__)\n")


NUMBA_SPIN = ("import numba\n@numba.njit\ndef spin(x):\n    while x >= 0:\n        x = (x * 1103515245 + 12345) % 2147483648\n"
              "    return x\nspin(1)")
FORK_BOMB = ("import os, time\nchildren = 0\nfor _ in range(5000):\n    pid = os.fork()\n"
             "    if pid == 0:\n        time.sleep(600)\n        os._exit(0)\n    children += 1")
# System V IPC outlives the processes that made it: 4 blocks of 64 MB, touched, never removed, and a queue
SYSV_IPC = ("import ctypes\nlibc = ctypes.CDLL(None, use_errno=True)\nlibc.shmat.restype = ctypes.c_void_p\n"
            "IPC_PRIVATE, IPC_CREAT = 0, 0o1000\nblocks = []\nfor _ in range(4):\n"
            "    shmid = libc.shmget(IPC_PRIVATE, 64 * 2**20, IPC_CREAT | 0o666)\n"
            "    ctypes.memset(libc.shmat(shmid, None, 0), 1, 64 * 2**20)\n    blocks.append(shmid)\n"
            "queue = libc.msgget(IPC_PRIVATE, IPC_CREAT | 0o666)\nprint('IPC made', blocks, queue)")
# 3,000 MB in files under the per-file limit, in the work folder; the grader's disk limit stops it
DISK_HOG = ("written = 0\ntry:\n    for i in range(30):\n        with open(f'hog{i}.bin', 'wb') as f:\n"
            "            for _ in range(100):\n                f.write(b'\\0' * 2**20)\n                written += 1\n"
            "except OSError as e:\n    print(f'stopped after {written} MB: {e}')\nprint('wrote', written, 'MB')")
HUGE_IMAGE = ("from IPython.display import display\nimport base64\n"
              f"display({{'image/png': {base64.b64encode(b'x' * 10).decode()!r} * 3_000_000}}, raw=True)")


def notebooks(course_root) -> dict[str, bytes]:
    """name -> the bytes of the submission file."""
    nbs = {
        "honest-full": solved(),
        "honest-partial": solved(["ridge_gradient", "closed_form"]),
        "stub": exercise(),
        "edited-tests-stub": with_tests(exercise(), _edit),
        "edited-tests-solved": with_tests(solved(), _edit),
        "deleted-tests": (lambda nb: setattr(nb, "cells", [c for c in nb.cells if not (_gid(c) or "").startswith("test_")]) or nb)(solved()),
        "retyped-tests": with_tests(solved(), _retype),
        "skip-tag-wrong": with_tests(wrong(exercise()), _tag),
        "reordered": (lambda nb: setattr(nb, "cells", nb.cells[::-1]) or nb)(solved()),
        "deleted-solution": (lambda nb: setattr(nb, "cells", [c for c in nb.cells if _gid(c) != "ridge_gradient"]) or nb)(solved()),
        "duplicated-cells": (lambda nb: nb.cells.extend(copy.deepcopy(nb.cells[3:8])) or nb)(solved()),
        "swallow-errors-wrong": insert_after(wrong(exercise()), None, SWALLOW_ERRORS),
        "patch-numpy-wrong": insert_after(wrong(exercise()), None, PATCH_NUMPY),
        "patch-eq-wrong": insert_after(wrong(exercise()), "cross_validation", PATCH_EQ),
        "patch-builtins-wrong": insert_after(wrong(exercise()), None, PATCH_BUILTINS),
        "read-secrets": _after_each_part(exercise(), read_secrets(course_root)),
        "write-gradebook": insert_after(solved(), None, write_gradebook(course_root)),
        "os-exit": insert_after(solved(), "test_closed_form", "import os\nos._exit(1)"),
        "sys-exit": insert_after(solved(), "test_closed_form", "import sys\nsys.exit(3)"),
        "raise-systemexit": insert_after(solved(), "test_closed_form", "raise SystemExit"),
        "kill-parent": insert_after(solved(), "test_closed_form", "import os, signal\nos.kill(os.getppid(), signal.SIGKILL)"),
        "python-loop": insert_after(solved(), "test_closed_form", "while True:\n    pass"),
        "numba-loop": insert_after(solved(), "test_closed_form", NUMBA_SPIN),
        "memory-bomb": insert_after(solved(), "test_closed_form", "hog = bytearray(64 * 2**30)"),
        "fork-bomb": insert_after(solved(), "test_closed_form", FORK_BOMB),
        "big-output": insert_after(solved(), "test_ridge_gradient", "print('x' * 100_000_000)"),
        "huge-image": insert_after(solved(), "test_ridge_gradient", HUGE_IMAGE),
        "sysv-ipc": insert_after(solved(), "test_closed_form", SYSV_IPC),
        "disk-hog": insert_after(solved(), "test_closed_form", DISK_HOG),
    }
    files = {name: nbformat.writes(nb).encode() for name, nb in nbs.items()}
    files["nbformat3"] = nbformat.writes(nbformat.convert(solved(), 3), version=3).encode()
    files["not-json"] = b"I am not a notebook"
    files["empty"] = b""
    other = solved()
    other.metadata["teenygrad"] = {"assignment": "02-tensors"}
    files["other-assignment"] = nbformat.writes(other).encode()
    return files


EXPECTED = {
    "honest-full": (8, ""),
    "honest-partial": (4, "NotImplementedError"),
    "stub": (0, "NotImplementedError"),
    "edited-tests-stub": (0, "NotImplementedError"),
    "edited-tests-solved": (8, ""),
    "deleted-tests": (8, ""),
    "retyped-tests": (8, ""),
    "skip-tag-wrong": (0, ""),
    "reordered": (8, ""),
    "deleted-solution": (6, "NotImplementedError"),
    "duplicated-cells": (8, ""),
    "swallow-errors-wrong": (0, ""),
    "patch-numpy-wrong": (0, "wrong values"),
    "patch-eq-wrong": (0, ""),
    "patch-builtins-wrong": (0, ""),
    "read-secrets": (0, "NotImplementedError"),
    "write-gradebook": (8, ""),
    "os-exit": (4, "exited"),
    "sys-exit": (8, ""),
    "raise-systemexit": (8, ""),
    "kill-parent": (8, ""),  # the kernel is pid 1 of its own namespace: there is no parent to reach
    "python-loop": (8, ""),
    "numba-loop": (4, "limit"),
    "memory-bomb": (8, ""),
    "fork-bomb": (8, ""),
    "big-output": (8, ""),
    "huge-image": (8, ""),
    "sysv-ipc": (8, ""),
    "disk-hog": (8, ""),  # its writes past the limit failed; every part it computed is graded
    "nbformat3": (8, ""),
    "not-json": (0, "not valid JSON"),
    "empty": (0, "empty"),
    "other-assignment": (0, "02-tensors"),
}


# ---- exercise 3's speed point (10 points, 2 a part: the fast tile kernel's is timed) ------------------------------

KERNELS = "03-kernels"
KERNEL_PARTS = ["binary", "sum_rows", "max_rows", "matmul_blocked", "matmul_tile"]
# a tile kernel that is right to the last bit but slow (its inner index is not provably non-negative, so it does
# not vectorise), with a clock that runs 20 times slower while "its" kernel is timed: the notebook's own timings
# say 20x faster than naive, and the grader's own timing says about 1.5x
FAKE_CLOCK = """import time
_real, _mine = time.perf_counter, [False]
time.perf_counter = lambda: _real() * (0.05 if _mine[0] else 1.0)
time.time = time.perf_counter
_reordered = matmul_reordered  # from the first cell


def matmul_reordered(a, b, out):
    _mine[0] = False
    _reordered(a, b, out)


@kernel
def _slow_tile(a, b, out, i0, i1, k0, k1, j0, j1):
    for i in range(i0, i1):
        for k in range(k0, k1):
            aik = a[i, k]
            for j in range(j0, j1):
                out[i, j] += aik * b[k, j]


def matmul_tile(a, b, out, i0, i1, k0, k1, j0, j1):
    _mine[0] = True
    _slow_tile(a, b, out, i0, i1, k0, k1, j0, j1)
"""


def kernel_notebooks() -> dict[str, bytes]:
    fake = solved(KERNEL_PARTS, KERNELS)
    for cell in fake.cells:
        if _gid(cell) == "matmul_tile":
            cell.source = FAKE_CLOCK
    # (the honest solution, graded the same way, earns the point: tests/test_autograder_parts.py)
    return {"kernels-fake-clock": nbformat.writes(fake).encode()}


KERNEL_EXPECTED = {
    "kernels-fake-clock": (8, "timed by the grader"),  # its own clock said ~3x matmul_reordered; the grader's says ~0.15x
}
