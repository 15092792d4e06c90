"""How teenygrad compiles its kernels, and when a kernel is worth running on several threads (chapter 3).

Every kernel is a plain Python function decorated with `@kernel` (or `@kernel(parallel=True)`), importable as
`from teenygrad.kernels import kernel`. Numba compiles it to machine code on first call and caches the result
on disk (`cache=True`): in `__pycache__` beside the source, or, when the package directory is read-only, in
numba's per-user cache directory (set NUMBA_CACHE_DIR to choose another), so a second Python process starts
without recompiling. Saves to that cache go through `_SerialCache` (below): one process at a time per function,
stamped with a digest of all the kernels' source, so that editing one kernel recompiles the kernels that call it.

Debugging switch: `TEENYGRAD_JIT=0` (set before importing teenygrad) runs every kernel as plain Python,
so print() and pdb work inside kernels. Slow, but the results are the same.

Threads: a kernel that comes in a serial and a parallel version asks `parallel_pays(work)` which to run.
`work` is the call's size in *element operations*: one float read, computed and written counts 1; a tanh or
an exp inside the loop counts about 8; a matmul's multiply-add counts 1/4 (in registers, 16 lanes at a time).
Below PARALLEL_MIN_WORK the other thread's wake-up (microseconds, far more on a busy machine) costs more than
it saves, measured on the kernels of chapters 3 and 9 on 2 cores.
"""
from __future__ import annotations

import contextlib
import hashlib
import itertools
import os
import re
from pathlib import Path
from typing import Callable, Iterator

import numba
import numpy as np

JIT_ENABLED = os.environ.get("TEENYGRAD_JIT", "1").strip().lower() not in ("0", "false", "no", "off")

prange = numba.prange if JIT_ENABLED else range

try:
    import fcntl
except ImportError:  # Windows: no flock; saves stay as numba makes them
    fcntl = None

def kernels_digest(folder: Path) -> str:
    """A digest of the kernels' source files in `folder` (teenygrad/kernels), for `_SerialCache`'s stamp. Files
    with an exercise's pieces are left out: the learner's edition stubs those, and the grader's sandboxes must
    still find the warm cache built from the book's package. (A kernel elsewhere that calls one of theirs,
    exercise 8's index_add calling movement.checked_index, is not recompiled when their file changes: clear the
    caches after editing it, as CONTRIBUTING.md says.)"""
    digest = hashlib.sha256()
    for path in sorted(folder.glob("*.py")):
        if not re.search(rb"^\s*@exercise\(", text := path.read_bytes(), re.M):
            digest.update(path.name.encode() + b"\0" + text)
    return digest.hexdigest()[:16]


if JIT_ENABLED:
    from numba.core import sigutils
    from numba.core.caching import FunctionCache, IndexDataCacheFile
    from numba.core.serialize import dumps

    class _SerialIndex(IndexDataCacheFile):
        """numba's index of one function's cached versions (signature -> data file), saved under a lock.

        numba saves a version by reading the index, taking the first free data file name, and writing both.
        Two processes saving versions of one function at once (the compiler's workers, two test workers, the
        book beside a grader) can take the same name, and the index then points one version's signature at
        the other's machine code, which numba loads without checking: a float64 call ran int64 code and
        returned garbage. Here one process saves at a time, and the code is written before its entry."""

        def save(self, key: object, data: object) -> None:
            with open(self._index_path + ".lock", "a") as lock:
                if fcntl is not None:
                    fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file is closed
                index = self._load_index()
                taken = set(index.values())
                name = index.get(key) or next(n for i in itertools.count(1) if (n := self._data_name(i)) not in taken)
                self._save_data(name, data)
                index[key] = name
                self._save_index(index)

    KERNELS_DIGEST = kernels_digest(Path(__file__).resolve().parent)

    def _closure_key(fn: Callable) -> str:
        """A digest of what `fn` closes over that is the same in every process: a kernel by its name and
        bytecode (and what it closes over in turn), anything else pickled as numba does."""
        digest = hashlib.sha256()
        for cell in fn.__closure__ or ():
            value = cell.cell_contents
            inner = getattr(value, "py_func", None)
            if isinstance(value, numba.core.dispatcher.Dispatcher) and inner is not None:
                digest.update(inner.__qualname__.encode() + inner.__code__.co_code + _closure_key(inner).encode())
            else:
                digest.update(dumps(value))
        return digest.hexdigest()

    class _SerialCache(FunctionCache):
        """numba's disk cache of a function, saving through `_SerialIndex`; a loaded version compiled for other
        argument types (an index left wrong by an older numba or teenygrad) is not used: it is compiled again.
        A cached version holds the code of every kernel it calls, and numba checks only the kernel's own file
        (after an edit of matmul.py, matmul_views loaded the old micro-kernel), so the stamp adds KERNELS_DIGEST."""

        def __init__(self, py_func: Callable) -> None:
            super().__init__(py_func)
            self._cache_file = _SerialIndex(self._cache_path, self._impl.filename_base,
                                            (self._impl.locator.get_source_stamp(), KERNELS_DIGEST))

        def _index_key(self, sig: object, codegen: object) -> tuple:
            """numba's key, with a stable stand-in for each kernel the function closes over.

            A kernel defined inside another function (an exercise's piece: its serial and parallel versions)
            calling another defined there closes over that kernel, and numba keys the cache on the pickled
            closure, which holds a per-process id: no process found another's version, and each recompiled
            it (7 s per training run for attention's backward). A closed-over kernel is keyed by its name and
            bytecode instead; an edit to it changes the file, which numba's stamp already checks."""
            key = super()._index_key(sig, codegen)
            if self._py_func.__closure__ is None:
                return key
            return key[:2] + ((key[2][0], _closure_key(self._py_func)),)

        def _load_overload(self, sig: object, target_context: object) -> object:
            cres = super()._load_overload(sig, target_context)
            wanted = tuple(sigutils.normalize_signature(sig)[0])
            return cres if cres is None or tuple(cres.signature.args) == wanted else None

PARALLEL_MIN_WORK = 1 << 16  # element operations below which a kernel stays on the calling thread
CHUNKS = 16                  # tasks per parallel call: a few per thread, so an unlucky thread catches up


def kernel(fn: Callable | None = None, *, parallel: bool = False, fastmath: bool | set = False,
           numpy_errors: bool = False, inline: bool = False) -> Callable:
    """Compile `fn` with numba (nopython mode, cached on disk), unless TEENYGRAD_JIT=0.

    numpy_errors: x / 0 gives inf or nan as in numpy instead of raising ZeroDivisionError as in Python;
    the check for a zero divisor is a branch per division, which stops the loop from being vectorised.
    inline: numba pastes the body into each kernel that calls it, before compiling that kernel."""

    def wrap(f: Callable) -> Callable:
        if not JIT_ENABLED:
            return f
        compiled = numba.njit(cache=True, parallel=parallel, fastmath=fastmath, nogil=True,
                              error_model="numpy" if numpy_errors else "python",
                              inline="always" if inline else "never")(f)
        compiled._cache = _SerialCache(f)  # numba's disk cache, saved one process at a time (above)
        return compiled

    return wrap(fn) if fn is not None else wrap


def any_layout(fn: Callable) -> Callable:
    """`fn` (a kernel) compiled once per dtype and rank of its array arguments, whatever their layouts.

    numba compiles a kernel again for each combination of layouts it is called with: 'C' (contiguous), 'F'
    (a transpose) or 'A' (any strides). For the matmul kernels, which read every operand through its strides
    anyway, that was up to nine copies per dtype of the slowest code to compile in the package (15 s each for
    the parallel one). This calls the single version typed 'A' (any strides), which reads them all."""
    if not JIT_ENABLED:
        return fn
    versions: dict[tuple, Callable] = {}
    array = np.ndarray

    def call(*args: object) -> object:
        key = tuple([(a.dtype, a.ndim, a.flags.writeable) if type(a) is array else type(a) for a in args])
        version = versions.get(key)
        if version is None:  # compiled (or loaded from numba's disk cache) once per key
            version = versions[key] = fn.compile(tuple(
                numba.types.Array(numba.from_dtype(a.dtype), a.ndim, "A", readonly=not a.flags.writeable)
                if type(a) is array else numba.typeof(a) for a in args))
        return version(*args)

    call.__name__, call.__doc__ = fn.__name__, fn.__doc__
    return call


def num_threads() -> int:
    """Threads a parallel kernel runs on (1 without the JIT, where prange is range)."""
    return numba.get_num_threads() if JIT_ENABLED else 1


def parallel_pays(work: int) -> bool:
    """Is a call of `work` element operations (see the module docstring) worth waking the other threads for?"""
    return JIT_ENABLED and work >= PARALLEL_MIN_WORK


@contextlib.contextmanager
def force_path(path: str) -> Iterator[None]:
    """Run every kernel that has two versions on one of them inside the block, whatever the size of its call:
    `with force_path("serial"): ...` or `"parallel"`. For tests that check both paths agree, and for warming
    the numba cache of both. (Without the JIT there is only one path: the block changes nothing.)"""
    global PARALLEL_MIN_WORK
    if path not in ("serial", "parallel"):
        raise ValueError(f"force_path: path must be 'serial' or 'parallel', got {path!r}")
    saved, PARALLEL_MIN_WORK = PARALLEL_MIN_WORK, (1 << 62 if path == "serial" else 0)
    try:
        yield
    finally:
        PARALLEL_MIN_WORK = saved
