"""The timing rules every benchmark here uses: best wall time of several calls after a warm-up; steps taken in
alternation; and each framework that keeps a thread pool (teenygrad's numba kernels, numpy's BLAS, PyTorch) timed in
a process of its own.

Why separate processes: a thread pool keeps its threads spinning for a moment after each call, and two pools in
one process (numba's and OpenBLAS's, or numba's and PyTorch's) fight over the cores. On a 2-core machine,
teenygrad's 1024^2 matmul measured 0.51x numpy in one run and 1.12x in the next when both were timed in one process;
in separate processes, 0.99-1.00x every time. `Child` runs a function in a new Python process (the caller's
script imported there under another name, so its `if __name__ == "__main__"` block does not run), and can go on
calling the step it returns, one call at a time, so that steps in two processes can still alternate.
"""
from __future__ import annotations

import importlib.util
import os
import pickle
import subprocess
import sys
import time
from typing import Callable


def best_time(fn: Callable[[], object], repeats: int, budget: float) -> float:
    """Best wall time of `repeats` calls (fewer if they exceed `budget` seconds), after one warm-up call.

    The best, not the mean: on a shared machine every disturbance only ever adds time.
    """
    fn()
    best = float("inf")
    start = time.perf_counter()
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
        if time.perf_counter() - start > budget:
            break
    return best


def alternate(steps: dict[str, Callable], data: list, warmup: int = 3) -> tuple[dict[str, list[float]], dict]:
    """Run the training steps in alternation over the same batches: step(x, y) for each (x, y) of `data`, every
    step on a batch before the next batch. The first `warmup` batches are not timed. Returns the seconds each
    step took and what each returned (warm-up included), by name. Alternating makes a busy machine slow them
    all alike. A step may be a `Child`: its time is the one measured in its process (not the messages')."""
    times: dict[str, list[float]] = {name: [] for name in steps}
    results: dict[str, list] = {name: [] for name in steps}
    for i, (x, y) in enumerate(data):
        for name, fn in steps.items():
            t0 = time.perf_counter()
            results[name].append(fn(x, y))
            seconds = fn.seconds if isinstance(fn, Child) else time.perf_counter() - t0
            if i >= warmup:
                times[name].append(seconds)
    return times, results


def has_module(name: str) -> bool:
    """Is `name` importable (without importing it here: importing torch would load its thread pool)?"""
    return importlib.util.find_spec(name) is not None


# The project's rule for numpy's BLAS: OPENBLAS_CORETYPE (which older OpenBLAS builds need on some machines) is
# unset, with OPENBLAS_L2_SIZE, for the process that times numpy, and only there.
BLAS_NOTE = "numpy's process runs without OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE (they were set here)"


def numpy_env() -> tuple[dict[str, str], str | None]:
    """The environment of the process that times numpy's BLAS, and a line saying what was changed (or None)."""
    env = dict(os.environ)
    if "OPENBLAS_CORETYPE" not in env:
        return env, None
    env.pop("OPENBLAS_CORETYPE")
    env.pop("OPENBLAS_L2_SIZE", None)
    return env, BLAS_NOTE


class Child:
    """`fn(*args)` called in a new Python process, and then, if it returned `(step, info)` with `step` callable,
    `step` called there each time this object is called (its result comes back; `seconds` is the time the call
    took in the child). `fn` must be a module-level function of a script or module; arguments and results are
    pickled. Use as a context manager, or call `close()`.

        with Child(measure, sizes, env=numpy_env()[0]) as c:
            result = c.result
    """

    def __init__(self, fn: Callable, *args, env: dict[str, str] | None = None) -> None:
        module = sys.modules[fn.__module__]
        path = getattr(module, "__file__", None)
        self.proc = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--child"], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, env=env)  # its stderr (and its prints) are ours
        self.seconds = 0.0
        reply = self._ask(("start", path, fn.__module__, fn.__qualname__, args))
        self.result = reply
        self.info = reply[1] if isinstance(reply, tuple) and len(reply) == 2 and reply[0] == "<step>" else None

    def _ask(self, message: tuple):
        pickle.dump(message, self.proc.stdin)
        self.proc.stdin.flush()
        try:
            ok, seconds, value = pickle.load(self.proc.stdout)
        except EOFError:
            self.proc.wait()
            code = self.proc.returncode
            raise RuntimeError(f"the child process died (exit code {code}); see its stderr above") from None
        if not ok:
            raise RuntimeError(f"in the child process: {value}")
        self.seconds = seconds
        return value

    def __call__(self, *args):
        return self._ask(("step", args))

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.stdin.close()
            self.proc.wait()

    def __enter__(self) -> Child:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def run_in_child(fn: Callable, *args, env: dict[str, str] | None = None):
    """fn(*args), computed in a new Python process (so its thread pools die with it); its result."""
    with Child(fn, *args, env=env) as child:
        return child.result


def _serve() -> None:
    """The child's side of `Child`: messages on stdin, replies on the original stdout; its prints go to stderr."""
    import traceback
    inbox, outbox = sys.stdin.buffer, os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # what the benchmark prints must not mix with the replies
    sys.stdout = sys.stderr
    step = None
    while True:
        try:
            message = pickle.load(inbox)
        except EOFError:
            return
        try:
            t0 = time.perf_counter()
            if message[0] == "start":
                _, path, name, qualname, args = message
                if name in ("__main__", "__mp_main__") and path:  # a script: import it under another name
                    sys.path.insert(0, os.path.dirname(path))
                    spec = importlib.util.spec_from_file_location("_benchmark_child", path)
                    module = importlib.util.module_from_spec(spec)
                    sys.modules["_benchmark_child"] = module
                    spec.loader.exec_module(module)
                else:
                    module = importlib.import_module(name)
                fn = module
                for part in qualname.split("."):
                    fn = getattr(fn, part)
                value = fn(*args)
                if isinstance(value, tuple) and len(value) == 2 and callable(value[0]):
                    step, value = value[0], ("<step>", value[1])
            else:
                value = step(*message[1])
            reply = (True, time.perf_counter() - t0, value)
        except Exception:  # reported to the parent, which raises
            reply = (False, 0.0, traceback.format_exc())
        pickle.dump(reply, outbox)
        outbox.flush()


if __name__ == "__main__" and sys.argv[1:] == ["--child"]:
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    _serve()
